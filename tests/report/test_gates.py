"""CI regression gates: ``acurank eval RUN --qrels Q --min MEASURE=VALUE --against BASE --max-drop D --alpha A``.

Figures by hand. Four queries, each with one relevant document ``a``. The base run ranks ``a`` first
everywhere (RR 1.0); the candidate ranks it second on q1-q3 and first on q4: RR = (3 x 0.5 + 1) / 4 =
0.625, a drop of 0.375. Per-query differences 0.5, 0.5, 0.5, 0: mean 0.375, sd 0.25, t = 0.375 / (0.25 / 2)
= 3 with 3 degrees of freedom; two-sided p = 2 (1 - F(3)), F(t) = 1/2 + (t / (sqrt 3 (1 + t^2 / 3)) +
atan(t / sqrt 3)) / pi = 1/2 + (sqrt 3 / 4 + pi / 3) / pi, so p = 0.0577.
"""

from __future__ import annotations

import math

from conftest import acurank



def _files(tmp_path):
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("".join(f"q{i} 0 a 1\nq{i} 0 b 0\n" for i in range(1, 5)))
    base = tmp_path / "base.run"
    base.write_text("".join(f"q{i} Q0 a 1 2.0 base\nq{i} Q0 b 2 1.0 base\n" for i in range(1, 5)))
    cand = tmp_path / "cand.run"
    cand.write_text("".join(f"q{i} Q0 b 1 2.0 cand\nq{i} Q0 a 2 1.0 cand\n" for i in range(1, 4))
                    + "q4 Q0 a 1 2.0 cand\nq4 Q0 b 2 1.0 cand\n")
    return qrels, base, cand


def test_floors_hold_and_fail_with_one_line_each(tmp_path):
    qrels, base, cand = _files(tmp_path)
    held = acurank("eval", cand, "--qrels", qrels, "-m", "RR", "--min", "RR=0.625", "--min", "P@1=0.25")  # P@1: only q4 has a first
    assert held.returncode == 0 and held.stderr.strip().endswith(f"gates held on {cand}: RR 0.6250 >= 0.6250; P@1 0.2500 >= 0.2500")
    failed = acurank("eval", cand, base, "--qrels", qrels, "-m", "RR", "--min", "RR=0.63", check=False)
    assert failed.returncode == 1
    lines = [l for l in failed.stderr.splitlines() if "gate" in l]
    assert lines == [f"acurank: gate failed: {cand}: RR 0.6250 < min 0.6300"]  # the base (RR 1) holds
    # nDCG@10 = (3 / log2(3) + 1) / 4 = 0.7232, evaluated (and shown) though -m does not name it
    shown = acurank("eval", cand, "--qrels", qrels, "--min", "nDCG@10=0.8", check=False)
    assert shown.returncode == 1 and "ndcg_cut_10" in shown.stdout and "nDCG@10 0.7232 < min 0.8000" in shown.stderr


def test_against_fails_on_a_large_drop_or_a_significant_one(tmp_path):
    qrels, base, cand = _files(tmp_path)
    p = 2 * (1 - (0.5 + (3 / (math.sqrt(3) * 4) + math.atan(3 / math.sqrt(3))) / math.pi))
    assert abs(p - 0.0577) < 1e-4
    ok = acurank("eval", cand, "--qrels", qrels, "-m", "RR", "--against", base, "--max-drop", "0.4")
    assert ok.returncode == 0 and "(drop 0.3750 <= 0.4000, p = 0.058)" in ok.stderr  # 0.375 <= 0.4, p 0.058 >= 0.05
    assert f"gates held on {cand}: RR 0.6250 against {base} 1.0000" in ok.stderr
    big = acurank("eval", cand, "--qrels", qrels, "-m", "RR", "--against", base, "--max-drop", "0.3", check=False)
    assert big.returncode == 1
    assert f"acurank: gate failed: {cand}: RR 0.6250 against {base} 1.0000: drop 0.3750 > max 0.3000 " \
           f"(paired t, p = {p:.2g})" in big.stderr
    sig = acurank("eval", cand, "--qrels", qrels, "-m", "RR", "--against", base, "--max-drop", "0.4",
                  "--alpha", "0.1", check=False)
    assert sig.returncode == 1
    assert f"RR 0.6250 against {base} 1.0000: significant (paired t, p = {p:.2g} < 0.1)" in sig.stderr
    better = acurank("eval", base, "--qrels", qrels, "-m", "RR", "--against", cand)  # a gain never fails
    assert better.returncode == 0


def test_gate_usage_errors_exit_2(tmp_path):
    qrels, base, cand = _files(tmp_path)
    for flag, value, fragment in (("--min", "RR", "expected MEASURE=VALUE"), ("--min", "RR=high", "expected MEASURE=VALUE"),
                                  ("--min", "Nonsense@3=1", "unknown measure"), ("--max-drop", "-1", "--max-drop")):
        bad = acurank("eval", cand, "--qrels", qrels, "--against", base, flag, value, check=False)
        assert bad.returncode == 2 and fragment in bad.stderr and "Traceback" not in bad.stderr, bad.stderr


def test_a_gates_setting_without_its_gate_is_refused(tmp_path):
    """--alpha and --max-drop set the gate --against makes: without it they were taken and did nothing."""
    qrels, base, cand = _files(tmp_path)
    for flag, value in (("--alpha", "0.1"), ("--max-drop", "0.2")):
        bad = acurank("eval", cand, "--qrels", qrels, flag, value, check=False)
        assert (bad.returncode, bad.stderr.strip()) == (2, f"acurank: error: {flag} sets the gate against a baseline "
                                                           "run; give --against BASE.run, or drop it")

