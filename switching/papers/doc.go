// Package papers holds the optimal-policy tables printed in the papers this
// project implements, with the models that produce them, so that a solver's
// result can be set beside the printed numbers (metasched policy papers).
//
// What the project's solver finds, with an independent check:
//   - Palmer and Mitrani, Table 2 (N = 2, switching takes time): reproduced
//     exactly by the infinite-horizon discounted model, α = 0.95, Λ = 1, J = 30,
//     no price on blocked arrivals.
//   - Palmer and Mitrani, Table 1 (zero switching times, switching cost 10):
//     differs from the converged infinite-horizon policy in 7 of 121 cells,
//     and is exactly the finite-horizon policy with 19 or 20 steps to go (at
//     J = 30, and at any J ≥ 11): the printed table was not converged. The
//     converged policy is taken as the truth.
//   - Fisher et al., Table I (N = 3, M = 3): far from the optimal policy of
//     the model as written in the text under the printed parameters. The
//     model is not tuned to match it.
//
// The design is described in docs/research/solving.md of the
// repository, "The papers' tables".
package papers
