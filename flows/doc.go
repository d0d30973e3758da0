// Package flows owns the flow document: its types, strict parsing, validation that
// reports every problem with its node and JSON path, compilation into an immutable Plan,
// state reducers, and the component interface with its registry.
//
// It imports no other Sluice package and does no I/O: the store keeps documents, the
// engine runs plans.
package flows
