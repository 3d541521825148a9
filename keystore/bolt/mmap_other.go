//go:build !windows

package bolt

// initialMmapSize is the memory map bbolt starts with: address space, not
// memory, and enough for several million keys before the first remap.
const initialMmapSize = 1 << 30
