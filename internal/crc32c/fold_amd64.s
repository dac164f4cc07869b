#include "textflag.h"

// func fold(c uint32, p *byte, n int) uint32
//
// Register use:
//   SI  the next unread byte, CX the bytes left (a multiple of 16)
//   Z0-Z3  the four 64-byte accumulators; Z3 is the one that goes on alone
//   Z10  the 256-byte multipliers in every lane, Z11 the 64-byte ones
//   X12  the 16-byte multipliers, X0 the 16-byte accumulator at the end
// Every fold is acc = lo(acc)·k1 ^ hi(acc)·k2 ^ next: VPCLMULQDQ $0x00 takes
// the low quadwords of both operands, $0x11 the high ones, and VPTERNLOGD
// $0x96 is a three-way XOR.
TEXT ·fold(SB), NOSPLIT, $0-28
	MOVL c+0(FP), AX
	MOVQ p+8(FP), SI
	MOVQ n+16(FP), CX
	VMOVD AX, X4                     // the register, zero above it
	VBROADCASTI32X4 ·foldConsts+16(SB), Z11
	CMPQ CX, $256
	JB   single

	VMOVDQU64 (SI), Z0
	VMOVDQU64 64(SI), Z1
	VMOVDQU64 128(SI), Z2
	VMOVDQU64 192(SI), Z3
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
	VPTERNLOGD $0x96, (SI), Z5, Z0
	VPTERNLOGD $0x96, 64(SI), Z6, Z1
	VPTERNLOGD $0x96, 128(SI), Z7, Z2
	VPTERNLOGD $0x96, 192(SI), Z8, Z3
	ADDQ $256, SI
	SUBQ $256, CX
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

single:
	VMOVDQU64 (SI), Z3
	VPXORQ Z4, Z3, Z3
	ADDQ $64, SI
	SUBQ $64, CX

loop64:
	CMPQ CX, $64
	JB   lanes
	VPCLMULQDQ $0x00, Z11, Z3, Z5
	VPCLMULQDQ $0x11, Z11, Z3, Z3
	VPTERNLOGD $0x96, (SI), Z5, Z3
	ADDQ $64, SI
	SUBQ $64, CX
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
	VPXOR (SI), X5, X5
	VPXOR X5, X0, X0
	ADDQ $16, SI
	SUBQ $16, CX
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
	MOVL DX, ret+24(FP)
	RET
