"""``acurank prompt``: ``render`` shows the exact prompts of a query's first round with no model; ``list`` names the
built-in prompt formats. ``render`` reads what ``rerank`` reads (the run, topics, texts; the method's and the
backend's flags) and prints what ``--log-prompts`` would record before each answer (:mod:`acurank_cli.run.render`)."""

from __future__ import annotations

import json
from typing import Annotated, Optional

import typer

from ..run.pipeline import DEFAULTS
from .flags import IO, PanelledCommand, Reranker, method_option, with_generated_flags

HELP = ("Prompts without a model: `render` prints a query's first-round windows as the backend would prompt them "
        "(the record --log-prompts writes), `list` the built-in prompt formats.\n\n"
        "Example: acurank prompt render sample_runs/dl19/bm25.run --reranker openai:gpt-4o-mini --qid 264014 --nth 1")

prompt_app = typer.Typer(name="prompt", help=HELP, no_args_is_help=True, add_completion=False, rich_markup_mode=None,
                         pretty_exceptions_enable=False)


def render(
    ctx: typer.Context,
    run: Annotated[str, typer.Argument(help="TREC run, or a candidate file (as rerank reads it); '-' = stdin.")],
    *,
    method: method_option(f"Method whose first round is shown (default {DEFAULTS.method}): {{methods}}.") = None,
    reranker: Reranker = "openai:gpt-4o-mini",
    qid: Annotated[Optional[str], typer.Option("--qid", rich_help_panel=IO, help="The query (default: the run's first).")] = None,
    nth: Annotated[Optional[int], typer.Option("--nth", min=1, rich_help_panel=IO, help="Window N of the first round (default: every window of it). Later rounds depend on the model's answers.")] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", rich_help_panel=IO, help="text (the messages, then the model text where there is one) or json (one --log-prompts record a window, its prompt fields).")] = "text",
    topics: Annotated[Optional[str], typer.Option("--topics", rich_help_panel=IO, help="Topics 'qid<TAB>text'.")] = None,
    corpus: Annotated[Optional[str], typer.Option("--corpus", rich_help_panel=IO, help="Doc texts: JSONL {_id,title,text} or {id,contents} (.gz ok).")] = None,
    index: Annotated[Optional[str], typer.Option("--index", rich_help_panel=IO, help="Take doc texts from a Lucene index (stored raw docs).")] = None,
    dataset: Annotated[Optional[str], typer.Option("--dataset", rich_help_panel=IO, help="irds:<id>: topics and texts from ir_datasets.")] = None,
    depth: Annotated[int, typer.Option("--depth", "--hits", min=1, rich_help_panel=IO, help="Candidates per query, as rerank takes them.")] = DEFAULTS.depth,
    skip_missing: Annotated[bool, typer.Option("--skip-missing", rich_help_panel=IO, help="Leave out the documents without a text, as rerank does (a query without one: refused).")] = False,
    **generated,
) -> None:
    """Print the prompts of a query's first round as the backend would build them, with no model call."""
    from ..errors import InputError
    from ..rerankers.backend import BackendChoice
    from ..run import pipeline
    from ..run.inputs import InputSpec
    from ..run.render import render as render_windows

    if fmt not in ("text", "json"):
        raise InputError(f"--format {fmt}: must be text or json")
    options, backend_options = pipeline.split_options(generated)
    strategy = pipeline.method(method, options, pipeline.ScoreSource.run_file)
    choice = BackendChoice.of(reranker, backend_options)
    prompter = choice.prompter()  # before reading: a backend that reads no prompt is refused at once
    try:
        inputs = InputSpec(run=run, depth=depth, topics=topics, corpus=corpus, index=index, dataset=dataset,
                           qids=qid, skip_missing=skip_missing, qids_flag="--qid").load(True)
        task = next(iter(inputs.tasks), None)
        if task is None:
            raise InputError(f"query {qid}: not in the run" if qid else "the run holds no query", run)
        from ..method.trueskill import check_scores

        check_scores([task], getattr(strategy, "init", None), inputs.source)  # rerank's check, naming the file
        shown = render_windows(strategy, task, inputs.docs, prompter, None if nth is None else [nth])
    finally:
        prompter.close()
    for note in inputs.notes:  # where the topics and texts came from, what was skipped: as rerank says them
        typer.echo(f"acurank: {note}", err=True)
    for one in shown:
        if fmt == "json":
            typer.echo(json.dumps(one.record, ensure_ascii=False))
            continue
        r = one.record
        typer.echo(f"# query {r['qid']}, window {one.nth} of {one.windows} in {strategy.name}'s first round; "
                   f"{r['backend']}, format {r['format']}: {r['prompt_tokens']} tokens counted with {r['counter']}, "
                   f"passages cut at {r['max_length']} words, answer budget {r['answer_tokens']} tokens")
        typer.echo(f"# documents: {' '.join(r['docids'])}")
        for m in one.messages:
            typer.echo(f"--- {m['role']} ---")
            typer.echo(m["content"])
        if one.text is not None:
            typer.echo(f"--- the model text ({r['prompt_tokens']} tokens) ---")
            typer.echo(one.text)


def list_prompts() -> None:
    """Name the built-in prompt formats and what each backend renders by default."""
    from ..rerankers.listwise.prompts import CHAT_MESSAGES, PROMPT_FORMATS

    typer.echo("The published prompt (AcuRank's and RankLLM's RankGPT prompt: system, the query, numbered passages, "
               "the answer's form) is the default; --instruction, --few-shot and --system-message change it, and "
               "--prompt FILE.yaml replaces it with a RankLLM template file. It reaches the model in one of these "
               "formats (--prompt NAME):")
    for fmt in (*PROMPT_FORMATS.values(), CHAT_MESSAGES):
        typer.echo(f"  {fmt.name:<11} {fmt.source}")
    typer.echo("hf: and vllm: use chat when the tokenizer has a chat template, else rankvicuna; openai: sends the "
               "messages (with --tokenizer, their tokens are counted through its chat template).")


def mount(app: typer.Typer) -> None:
    prompt_app.command("render", cls=PanelledCommand, help="Print a query's first-round prompts with no model "
                       "(what --log-prompts records).")(with_generated_flags(render))
    prompt_app.command("list", help="The built-in prompt formats.")(list_prompts)
    app.add_typer(prompt_app, name="prompt")
