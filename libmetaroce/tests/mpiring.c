/* mpiring: an MPI program run by mpi_test.go under Open MPI on the
 * metaroce provider (pml cm, mtl ofi): a ping-pong between ranks 0 and 1
 * over several sizes with every byte checked, then allreduces whose sums
 * are known, then a barrier. Prints "PASS rank N" and exits 0, or says
 * what differed and exits 1. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(int rank, const char *what, long i, long got, long want)
{
	fprintf(stderr, "FAIL rank %d: %s at %ld: got %ld, want %ld\n", rank, what, i, got, want);
	MPI_Abort(MPI_COMM_WORLD, 1);
	return 1;
}

static unsigned char pattern(int round, size_t size, long i) { return (unsigned char)(round * 31 + (long)size * 7 + i * 13); }

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, n;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	if (n != 2) {
		fprintf(stderr, "want 2 ranks, have %d\n", n);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	int peer = 1 - rank;
	(void)argc;
	static const size_t sizes[] = {0, 1, 64, 1000, 4096, 32768, 60000};
	unsigned char *buf = malloc(65536);
	for (int s = 0; s < (int)(sizeof sizes / sizeof sizes[0]); s++) {
		size_t size = sizes[s];
		for (int round = 0; round < 20; round++) {
			int tag = 100 + s;
			if (rank == 0) {
				for (long i = 0; i < (long)size; i++)
					buf[i] = pattern(round, size, i);
				MPI_Send(buf, (int)size, MPI_BYTE, peer, tag, MPI_COMM_WORLD);
				memset(buf, 0, 65536); /* what the pong must overwrite */
				MPI_Status st;
				MPI_Recv(buf, (int)size, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &st);
				int got;
				MPI_Get_count(&st, MPI_BYTE, &got);
				if (got != (int)size)
					return fail(rank, "pong length", round, got, (long)size);
				for (long i = 0; i < (long)size; i++)
					if (buf[i] != (unsigned char)~pattern(round, size, i))
						return fail(rank, "pong byte", i, buf[i], (unsigned char)~pattern(round, size, i));
			} else {
				MPI_Status st;
				MPI_Recv(buf, (int)size, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &st);
				if (st.MPI_SOURCE != peer)
					return fail(rank, "ping source", round, st.MPI_SOURCE, peer);
				for (long i = 0; i < (long)size; i++) {
					if (buf[i] != pattern(round, size, i))
						return fail(rank, "ping byte", i, buf[i], pattern(round, size, i));
					buf[i] = (unsigned char)~buf[i];
				}
				MPI_Send(buf, (int)size, MPI_BYTE, peer, tag, MPI_COMM_WORLD);
			}
		}
	}
	/* Messages that arrive before their receive is posted (unexpected),
	 * received out of tag order. */
	if (rank == 0) {
		for (int t = 0; t < 8; t++)
			MPI_Send(&t, 1, MPI_INT, peer, 500 + t, MPI_COMM_WORLD);
	} else {
		MPI_Barrier(MPI_COMM_WORLD);
		for (int t = 7; t >= 0; t--) {
			int v = -1;
			MPI_Recv(&v, 1, MPI_INT, peer, 500 + t, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			if (v != t)
				return fail(rank, "out-of-order tag", t, v, t);
		}
	}
	if (rank == 0)
		MPI_Barrier(MPI_COMM_WORLD);
	/* Allreduce: the sum over ranks of (rank+1)*(i+1) is 3*(i+1). */
	enum { N = 4096 };
	long *in = malloc(N * sizeof *in), *out = malloc(N * sizeof *out);
	for (int round = 0; round < 10; round++) {
		for (long i = 0; i < N; i++)
			in[i] = (rank + 1) * (i + 1) + round;
		MPI_Allreduce(in, out, N, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
		for (long i = 0; i < N; i++)
			if (out[i] != 3 * (i + 1) + 2 * round)
				return fail(rank, "allreduce", i, out[i], 3 * (i + 1) + 2 * round);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	printf("PASS rank %d\n", rank);
	free(in);
	free(out);
	free(buf);
	MPI_Finalize();
	return 0;
}
