//go:build !amd64

package crc32c

const useFold = false

func fold(c uint32, head *byte, mask uint64, dst, p *byte, n int) uint32 {
	panic("crc32c: no folding on this architecture")
}
