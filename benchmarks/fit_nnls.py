"""Why the regime search keeps its own vectorised two-column NNLS (analysis/fit/segments.py
`nnls_two`) beside scipy.optimize.nnls, which `regimes.linear_fit_rel` uses: the search
solves one small problem per candidate segment (tens of thousands per curve), and scipy
solves one problem a call.

Fits the same curves twice, with `nnls_two` and with a stand-in that hands each problem to
scipy.optimize.nnls (the problem rebuilt from its sums: A = chol(G)^T, b = L^-1 c), and
prints per curve size the problems solved, both wall times, and whether both found the
same regimes. Not a test: it measures.

    python benchmarks/fit_nnls.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
from scipy.optimize import nnls

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import collbench.analysis.fit.segments as segments  # noqa: E402
from collbench.analysis.fit.hockney import fit_curve  # noqa: E402

OWN = segments.nnls_two
SOLVED = [0]


def scipy_two(sums: tuple[np.ndarray, ...]) -> tuple[np.ndarray, np.ndarray]:
    """nnls_two, one scipy.optimize.nnls call per problem."""
    flat = [np.broadcast_to(s, np.shape(sums[0])).ravel() for s in sums]
    saa, sab, sbb, say, sby = flat
    alpha, slope = np.zeros(saa.size), np.zeros(saa.size)
    for i in range(saa.size):
        gram = np.array([[saa[i], sab[i]], [sab[i], sbb[i]]]) + 1e-300 * np.eye(2)
        try:
            lower = np.linalg.cholesky(gram)
        except np.linalg.LinAlgError:  # a singular problem: nnls_two's answer
            alpha[i], slope[i] = (float(v[0]) for v in OWN(tuple(s[i : i + 1] for s in flat)))
            continue
        (alpha[i], slope[i]), _ = nnls(lower.T, np.linalg.solve(lower, [say[i], sby[i]]))
    return alpha.reshape(np.shape(sums[0])), slope.reshape(np.shape(sums[0]))


def counted(solve):
    def run(sums):
        SOLVED[0] += np.size(sums[0])
        return solve(sums)

    return run


def main() -> None:
    rng = np.random.default_rng(0)
    print(f"{'sizes':>6} {'problems':>9} {'nnls_two s':>11} {'scipy s':>9}  same regimes")
    for count in (24, 128, 1000):
        sizes = np.unique(np.round(np.geomspace(8, 8e9, count)))
        times = (5 + sizes / 4e3 + np.minimum(sizes, 1e5) / 2e3) * np.exp(
            rng.normal(0, 0.02, len(sizes))
        )
        found = []
        for solve in (OWN, scipy_two):
            segments.nnls_two, SOLVED[0] = counted(solve), 0
            start = time.perf_counter()
            curve = fit_curve(sizes, times, 1.0)
            found.append((time.perf_counter() - start, SOLVED[0], curve.breakpoints))
        (own_s, problems, own_breaks), (scipy_s, _, scipy_breaks) = found
        same = "yes" if own_breaks == scipy_breaks else f"no: {own_breaks} vs {scipy_breaks}"
        print(f"{len(sizes):>6} {problems:>9} {own_s:>11.3f} {scipy_s:>9.3f}  {same}")
    segments.nnls_two = OWN


if __name__ == "__main__":
    main()
