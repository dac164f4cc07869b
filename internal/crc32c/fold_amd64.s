#include "textflag.h"

// func fold(c uint32, head *byte, mask uint64, dst, p *byte, n int) uint32
//
// Register use:
//   SI  the next unread byte, CX the bytes left (a multiple of 16)
//   R8  head: if not nil, the stream starts with the bytes at head that
//       mask's set bits pick (the first h, a header), and p's first 64-h
//       complete the first block; K1 picks the header's bytes, K2 the rest.
//       dst is then never nil: the payload goes after the header.
//   DI  where the next byte read from p is copied to; nil copies nothing
//   Z0-Z3  the four 64-byte accumulators; Z3 is the one that goes on alone
//   Z12-Z15  the 256 bytes just read (one block at a time after the loop)
//   Z10  the 256-byte multipliers in every lane, Z11 the 64-byte ones
//   X12  the 16-byte multipliers, X0 the 16-byte accumulator at the end
// Every fold is acc = lo(acc)·k1 ^ hi(acc)·k2 ^ next: VPCLMULQDQ $0x00 takes
// the low quadwords of both operands, $0x11 the high ones, and VPTERNLOGD
// $0x96 is a three-way XOR. The copy is a store of the registers the fold
// reads anyway, so it costs no second pass over the bytes; the test of DI
// per block is a branch that always goes the same way in one call.
TEXT ·fold(SB), NOSPLIT, $0-52
	MOVL c+0(FP), AX
	MOVQ head+8(FP), R8
	MOVQ dst+24(FP), DI
	MOVQ p+32(FP), SI
	MOVQ n+40(FP), CX
	VMOVD AX, X4                     // the register, zero above it
	VBROADCASTI32X4 ·foldConsts+16(SB), Z11
	TESTQ R8, R8
	JNZ  headed
	CMPQ CX, $256
	JB   single

	VMOVDQU64 (SI), Z0
	VMOVDQU64 64(SI), Z1
	VMOVDQU64 128(SI), Z2
	VMOVDQU64 192(SI), Z3
	TESTQ DI, DI
	JZ   first
	VMOVDQU64 Z0, (DI)
	VMOVDQU64 Z1, 64(DI)
	VMOVDQU64 Z2, 128(DI)
	VMOVDQU64 Z3, 192(DI)
	ADDQ $256, DI

first:
	VPXORQ Z4, Z0, Z0                // the register enters at the first bytes
	ADDQ $256, SI
	SUBQ $256, CX
	VBROADCASTI32X4 ·foldConsts+0(SB), Z10

loop256:
	CMPQ CX, $256
	JB   join
	VPCLMULQDQ $0x00, Z10, Z0, Z5
	VPCLMULQDQ $0x11, Z10, Z0, Z0
	VPCLMULQDQ $0x00, Z10, Z1, Z6
	VPCLMULQDQ $0x11, Z10, Z1, Z1
	VPCLMULQDQ $0x00, Z10, Z2, Z7
	VPCLMULQDQ $0x11, Z10, Z2, Z2
	VPCLMULQDQ $0x00, Z10, Z3, Z8
	VPCLMULQDQ $0x11, Z10, Z3, Z3
	VMOVDQU64 (SI), Z12
	VMOVDQU64 64(SI), Z13
	VMOVDQU64 128(SI), Z14
	VMOVDQU64 192(SI), Z15
	VPTERNLOGD $0x96, Z12, Z5, Z0
	VPTERNLOGD $0x96, Z13, Z6, Z1
	VPTERNLOGD $0x96, Z14, Z7, Z2
	VPTERNLOGD $0x96, Z15, Z8, Z3
	ADDQ $256, SI
	SUBQ $256, CX
	TESTQ DI, DI
	JZ   loop256
	VMOVDQU64 Z12, (DI)
	VMOVDQU64 Z13, 64(DI)
	VMOVDQU64 Z14, 128(DI)
	VMOVDQU64 Z15, 192(DI)
	ADDQ $256, DI
	JMP  loop256

join:
	// Z0 lies 64 bytes before Z1, Z1 before Z2, Z2 before Z3.
	VPCLMULQDQ $0x00, Z11, Z0, Z5
	VPCLMULQDQ $0x11, Z11, Z0, Z0
	VPTERNLOGD $0x96, Z5, Z0, Z1
	VPCLMULQDQ $0x00, Z11, Z1, Z5
	VPCLMULQDQ $0x11, Z11, Z1, Z1
	VPTERNLOGD $0x96, Z5, Z1, Z2
	VPCLMULQDQ $0x00, Z11, Z2, Z5
	VPCLMULQDQ $0x11, Z11, Z2, Z2
	VPTERNLOGD $0x96, Z5, Z2, Z3
	JMP  loop64

headed:
	// The first block is the header from head and p's first bytes after
	// it, merged by masked loads; the masked store copies those bytes to
	// their place after the header. A masked-off byte is neither read nor
	// written, so the addresses before p and dst are never touched.
	MOVQ mask+16(FP), R9
	KMOVQ R9, K1
	KNOTQ K1, K2
	POPCNTQ R9, R10                  // h, the header's length
	VMOVDQU8.Z (R8), K1, Z0
	SUBQ R10, SI
	SUBQ R10, DI
	VMOVDQU8 (SI), K2, Z0
	VMOVDQU8 Z0, K2, (DI)
	ADDQ $64, DI
	ADDQ $64, SI
	SUBQ $64, CX
	VPXORQ Z4, Z0, Z0                // the register enters at the first bytes
	CMPQ CX, $192
	JB   headsingle
	VMOVDQU64 (SI), Z1
	VMOVDQU64 64(SI), Z2
	VMOVDQU64 128(SI), Z3
	VMOVDQU64 Z1, (DI)
	VMOVDQU64 Z2, 64(DI)
	VMOVDQU64 Z3, 128(DI)
	ADDQ $192, DI
	ADDQ $192, SI
	SUBQ $192, CX
	VBROADCASTI32X4 ·foldConsts+0(SB), Z10
	JMP  loop256

headsingle:
	VMOVDQA64 Z0, Z3
	JMP  loop64

single:
	VMOVDQU64 (SI), Z3
	TESTQ DI, DI
	JZ   single1
	VMOVDQU64 Z3, (DI)
	ADDQ $64, DI

single1:
	VPXORQ Z4, Z3, Z3
	ADDQ $64, SI
	SUBQ $64, CX

loop64:
	CMPQ CX, $64
	JB   lanes
	VPCLMULQDQ $0x00, Z11, Z3, Z5
	VPCLMULQDQ $0x11, Z11, Z3, Z3
	VMOVDQU64 (SI), Z12
	VPTERNLOGD $0x96, Z12, Z5, Z3
	ADDQ $64, SI
	SUBQ $64, CX
	TESTQ DI, DI
	JZ   loop64
	VMOVDQU64 Z12, (DI)
	ADDQ $64, DI
	JMP  loop64

lanes:
	// Lanes 0, 1 and 2 fold over 48, 32 and 16 bytes onto lane 3; the
	// multipliers' fourth lane is zero, so its products vanish.
	VMOVDQU64 ·foldConsts+48(SB), Z10
	VPCLMULQDQ $0x00, Z10, Z3, Z5
	VPCLMULQDQ $0x11, Z10, Z3, Z6
	VPXORQ Z5, Z6, Z5
	VEXTRACTI64X4 $1, Z5, Y6
	VPXOR Y6, Y5, Y5                 // lanes 0^2 and 1^3
	VEXTRACTI128 $1, Y5, X6
	VPXOR X6, X5, X5                 // 0^1^2^3
	VEXTRACTI32X4 $3, Z3, X0
	VPXOR X5, X0, X0
	VMOVDQU ·foldConsts+32(SB), X12

loop16:
	CMPQ CX, $16
	JB   done
	VPCLMULQDQ $0x00, X12, X0, X5
	VPCLMULQDQ $0x11, X12, X0, X0
	VMOVDQU (SI), X13
	VPXOR X13, X5, X5
	VPXOR X5, X0, X0
	ADDQ $16, SI
	SUBQ $16, CX
	TESTQ DI, DI
	JZ   loop16
	VMOVDQU X13, (DI)
	ADDQ $16, DI
	JMP  loop16

done:
	// The CRC of what was folded is the CRC, from zero, of the 16 bytes
	// left.
	VMOVQ X0, AX
	VPEXTRQ $1, X0, BX
	XORL DX, DX
	CRC32Q AX, DX
	CRC32Q BX, DX
	VZEROUPPER
	MOVL DX, ret+48(FP)
	RET
