"""Every mutant the last mutmut run left alive (survived, or no test reached it), with its change and the
reason it is left: docs/mutation-survivors.md. Run from the repository root after scripts/mutation.sh.

Each reason is a rule below (module, function, a pattern of the changed line): the rules are the list of
explanations the issue asks for, and a survivor no rule explains is printed as UNEXPLAINED (exit 1).
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

from mutmut.mutation.data import SourceFileMutationData
from mutmut.mutation.diff_apply import get_diff_for_mutant
from mutmut.utils.file_utils import walk_mutatable_files

STATUS = {0: "survived", 5: "no tests", 33: "no tests"}

#: (module suffix, function regex, regex over "line => mutated line" or None, reason)
RULES: list[tuple[str, str, str | None, str]] = [
    # method/trueskill_fast.py
    ("trueskill_fast.py", "sum2", None,
     "equivalent: _sum2 runs only after a ZeroDivisionError, i.e. with a zero-precision term; the sum's "
     "precision is then 0 and its tau 0 * mu = 0 whatever the other term adds (with opposite precisions, "
     "the other way to divide by zero, it raises as the library does)"),
    ("trueskill_fast.py", "down", None,
     "equivalent: _down serves only the two-candidate loop, where the messages L*, R* are still 0 (_up_left "
     "and _up_right write them after the loop), Tp[x - 1] is Tp[1] for x = 0 in a list of two, and its "
     "ZeroDivisionError fallback needs a zero team precision, which finite sigmas never give"),
    ("trueskill_fast.py", "up_right|up_left", None,
     "equivalent: called once each, after the chain, for its two ends; Rp[m-1]/Rt[m-1] and Lp[0]/Lt[0] are "
     "never written by the sweeps (still 0), R*/L* are not read afterwards, and the ZeroDivisionError "
     "fallback has a zero-precision diff cavity, so it yields (0, 0) whatever its coefficients (see _sum2)"),
    ("trueskill_fast.py", "truncate", r"Up\[x\] = |Ut\[x\] = ",
     "equivalent: the two-candidate loop meets the same team messages each sweep, so its second truncation "
     "reproduces the first and stops; Up/Ut are not read after the loop"),
    ("trueskill_fast.py", "truncate", r"return 0\.0 => return 1\.0",
     "equivalent: an infinite precision change only makes the loop run again; the repeated sweep gives "
     "the same messages"),
    ("trueskill_fast.py", "chain_sweeps", r"_sum2\(|ia = ib = qa = qb|pi = 1\.0 / \(.*=> pi = None",
     "equivalent: the down-step's team cavities keep the performance prior's positive precision, so its "
     "ZeroDivisionError fallback is unreachable; the up-step falls back only for a zero-precision diff "
     "cavity, where _sum2 gives (0, 0) whatever its other arguments; and with the direct formula disabled "
     "(pi = None, ia/ib not numbers) the TypeError lands in _sum2, which adds the same two terms with the "
     "same operations, bit for bit"),
    ("trueskill_fast.py", "chain_sweeps", r"e < 0 else",
     "equivalent: differs only at e = 0 exactly (a diff mean exactly at the draw margin), probability zero"),
    ("trueskill_fast.py", "chain_sweeps", r"d > eps or d < neps|if d < 0:|sqrt\(d\) > eps|inf = _INF",
     "not observed: moves the sweep at which the chain stops only if a truncation update's tau and "
     "precision changes fall on different sides of 1e-4 (or exactly on it); no property-test window, "
     "fixed window or any of 5,000 random windows (seeds 0 and 1; n 3-30, four rating regimes; bit for bit against "
     "trueskill.rate by scripts/mutation_sweep_check.py) shows it"),
    ("trueskill_fast.py", "chain_sweeps", r"big = False => big = None|sweep in \(0, 1\)|^break => return$",
     "equivalent: big and sweep are only tested for truth; nothing follows the sweep loop"),
    ("trueskill_fast.py", "fast_update", r"dtype=np\.(float64|intp)|errstate",
     "equivalent for the documented inputs (float64 arrays, an integer sequence for order); errstate "
     "only silences numpy warnings"),
    ("trueskill_fast.py", "pow", r"dtype=np\.float64",
     "equivalent: a list of Python floats becomes float64 anyway"),
    ("trueskill_fast.py", "fast_update", r"<= MIN_DELTA:",
     "equivalent: differs only when a truncation update is exactly 1e-4"),
    ("trueskill_fast.py", "truncate|chain_sweeps", r"-xx => |if \(denom\)|0 < w < 1",
     "equivalent: where the library's cdf underflows (denom = 0), v = -x gives w = 0 and v = +x an "
     "enormous w, and both raise its FloatingPointError; elsewhere w = v(v + x) stays inside (0, 1) (the "
     "erfc approximation moves v + x by about |x| 1e-7 against 1/|x|), so moving the upper bound to 1 or 2 "
     "changes nothing"),
    # method/trueskill.py, method/uncertainty.py
    ("uncertainty.py", "threshold", r"40\.0|range\(200\)|f > 0|1e-12|slope|copysign|0\.5 \* \(lo|lo < nxt",
     "equivalent up to the 1e-12 bracket: the safeguarded Newton/bisection keeps a bracket around the root "
     "and returns it once narrower than 1e-12, whatever the step or the starting width; the tests compare t "
     "to 1e-9 (a start bracket that misses the root is caught: test_threshold_roots_far_from_every_mu)"),
    ("trueskill.py", "initial_ratings", r"if scale > 0:",
     "equivalent: the scale matters only for scores that are not all zero; all-zero scores have sd 0 (or "
     "NaN after 0/0), where the z-scores are zeros whatever s holds"),
    # io/candidates.py
    ("candidates.py", "acurank", r'json_str\(d, ',
     "unreachable: JSON object keys are always strings, so json_str never rejects a qrels docid"),
    ("candidates.py", "acurank|Bundleǁadd", r'check_id\(.*, "(docid|qid)", ""\)|check_id\(c\.docid, f"query \{qid\}: docid", ""\)|check_score\(c\.score, ""',
     "equivalent: the source argument of these checks is never shown; read_candidates re-raises with the "
     "file's name and the check's message"),
    # method/acurank.py, method/baselines.py
    ("baselines.py", "TourRankǁplan", r"points = \[0\] \* n|total = \[0\] \* n|points\[i\] \+= 1",
     "equivalent: ordering by points is unchanged when every document's points are shifted by the same "
     "constant or every increment is scaled by the same factor"),
    ("acurank.py", "AcuRankǁchoose", r"a\.prob\[i\] > p\.eps\] =>",
     "equivalent: s_i is a continuous probability; it equals eps with probability zero"),
    ("acurank.py", "AcuRankǁ_stop_without_groups", r"return StopReason\.round_cap if choice\.round_cap else StopReason\.tau",
     "unreachable part: a final pass has no group only if every s_i <= eps, which sum_i s_i = k rules out "
     "below n = k / eps documents (1,000 at eps 0.01, 100,000 at 1e-4); the not-final half (converged) is "
     "tested"),
]


def changes(diff: str) -> tuple[str, str]:
    minus = [l[1:].strip() for l in diff.splitlines() if l.startswith("-") and not l.startswith("---")]
    plus = [l[1:].strip() for l in diff.splitlines() if l.startswith("+") and not l.startswith("+++")]
    return " / ".join(minus), " / ".join(plus)


def reason_for(path: str, name: str, before: str, after: str) -> str | None:
    func = name.rpartition(".")[-1].split("__mutmut_")[0].lstrip("x_").removeprefix("ǁ")
    for module, func_re, line_re, reason in RULES:
        if path.endswith(module) and re.fullmatch(func_re, func) and (
                line_re is None or re.search(line_re, before + " => " + after)):
            return reason
    return None


def main() -> int:
    rows, unexplained = [], 0
    counts: Counter = Counter()
    for path in walk_mutatable_files():
        data = SourceFileMutationData(path=path)
        data.load()
        for name, code in sorted(data.exit_code_by_key.items()):
            counts[(str(path), code)] += 1
            if code not in STATUS:
                continue
            before, after = changes(get_diff_for_mutant(name, path=path))
            reason = reason_for(str(path), name, before, after)
            unexplained += reason is None
            rows.append((str(path), name.rpartition(".")[-1], STATUS[code], before, after, reason or "UNEXPLAINED"))
    out = ["# Surviving mutants, one by one", "",
           "Generated by `scripts/mutation_survivors.py` from the last `scripts/mutation.sh` run; the reasons are",
           "the rules in that script. `mutmut show NAME` prints a mutant's diff.", ""]
    for path in sorted({r[0] for r in rows}):
        out += [f"## `{path}`", "", "| mutant | status | line | mutated to | why it is left |", "|---|---|---|---|---|"]
        for p, name, status, before, after, reason in rows:
            if p == path:
                cell = lambda s: "`" + s.replace("|", "\\|").replace("`", "'")[:110] + "`" if s else ""  # noqa: E731
                out.append(f"| {name} | {status} | {cell(before)} | {cell(after)} | {reason} |")
        out.append("")
    Path("docs/mutation-survivors.md").write_text("\n".join(out))
    for (path, code), n in sorted(counts.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
        print(f"{path}: {n} x exit {code}")
    print(f"{len(rows)} survivors listed, {unexplained} unexplained")
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
