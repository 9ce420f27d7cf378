// Package graph will hold the grid's cluster graph on
// github.com/yourbasic/graph: loading and validating a grid file, Kruskal
// partition of the clusters into k zones with a union-find, and the widest
// path (bottleneck) bandwidth between every pair of clusters. It is a pure
// core: no I/O, no clock, deterministic.
//
// Not built yet: see the README for what exists today.
package graph
