package transport

// Access is the set of rights a memory region grants (§10.2).
type Access uint8

const (
	AccessLocalWrite Access = 1 << iota
	AccessRemoteRead
	AccessRemoteWrite
)

// Region is registered memory the transport may read from or write into on
// behalf of the peer. Addr is the address the peer uses for the first byte
// of Buf (the application's virtual address, or any base it advertises).
type Region struct {
	Key    uint32
	Addr   uint64
	Buf    []byte
	Access Access
}

// slice returns the bytes [addr, addr+n) of r when the whole range lies
// inside the region and the region grants want.
func (r *Region) slice(addr uint64, n uint32, want Access) ([]byte, bool) {
	if r.Access&want != want {
		return nil, false
	}
	if addr < r.Addr {
		return nil, false
	}
	off := addr - r.Addr
	if off > uint64(len(r.Buf)) || uint64(n) > uint64(len(r.Buf))-off {
		return nil, false
	}
	return r.Buf[off : off+uint64(n)], true
}

// Memory resolves remote keys to regions. It is the protection domain a
// connection belongs to: a key registered in another Memory is not found,
// so a peer can reach only regions registered in its own session.
// Lookup is called on every RMA packet; implementations must not allocate.
type Memory interface {
	Lookup(rkey uint32) (*Region, bool)
}

// MemoryTable is a simple Memory: a map from key to region. The owner adds
// and removes regions between calls into the Endpoint.
type MemoryTable struct {
	regions map[uint32]*Region
}

// NewMemoryTable returns an empty table.
func NewMemoryTable() *MemoryTable { return &MemoryTable{regions: map[uint32]*Region{}} }

// Add registers r under r.Key, replacing any region with that key.
func (m *MemoryTable) Add(r *Region) { m.regions[r.Key] = r }

// Remove deregisters key.
func (m *MemoryTable) Remove(key uint32) { delete(m.regions, key) }

// Lookup implements Memory.
func (m *MemoryTable) Lookup(key uint32) (*Region, bool) {
	r, ok := m.regions[key]
	return r, ok
}
