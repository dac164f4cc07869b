/*
 * ddp: the communication pattern of data-parallel training (PyTorch DDP,
 * Horovod), for `metaroce demo -topology mpi` (internal/demo/demo_mpi.go).
 *
 * Every step each rank produces a gradient buffer of float32 (its
 * "backward pass"), sums it over all ranks with one in-place
 * MPI_Allreduce(MPI_SUM), and applies it to its copy of the weights (the
 * optimizer step). The gradients are small integers chosen so that every
 * partial sum, in any order the MPI library adds them, is an integer well
 * below 2^24 and so exact in float32: after the allreduce every element
 * must equal its expected sum exactly, and the program checks every
 * element of every step on every rank.
 *
 *   g(rank, step, i) = h(i, step) - 8 + (rank + i) % 3,   h in [0, 15]
 *   sum over ranks   = P (h(i, step) - 8) + R[i % 3],
 *   R[k]             = sum over ranks r of (r + k) % 3
 *
 * Timed per step, on every rank: from the start of the backward pass
 * (filling the buffer) through the allreduce and the optimizer step; the
 * check lies outside (a training loop does not have it). No barrier
 * inside a step, as in DDP: ranks run free and the allreduce
 * synchronises them. At the end each step's time is reduced to its
 * maximum over the ranks (the slowest rank sets the pace of training)
 * and rank 0 prints one line per step and a result line:
 *
 *   ddp config ranks P floats N steps S warmup W
 *   ddp step K warmup 0|1 step_us T allreduce_us A
 *   ddp result errors E checked C
 *
 * E is the number of elements, over every step and rank, that were not
 * what they must be; C the number checked. Exit status 0 only when E is 0.
 *
 *   ddp [-n floats] [-s steps] [-w warmup steps]
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static inline int hval(uint64_t i, int step)
{
	uint64_t x = i * 0x9E3779B97F4A7C15ull ^ ((uint64_t)(step + 1) * 0xC2B2AE3D27D4EB4Full);
	x ^= x >> 29;
	x *= 0xBF58476D1CE4E5B9ull;
	x ^= x >> 32;
	return (int)(x & 15);
}

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

int main(int argc, char **argv)
{
	long n = 25000000 / 4; /* 25 MB of float32 */
	int steps = 20, warmup = 2, c;
	while ((c = getopt(argc, argv, "n:s:w:")) != -1) {
		switch (c) {
		case 'n': n = atol(optarg); break;
		case 's': steps = atoi(optarg); break;
		case 'w': warmup = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: ddp [-n floats] [-s steps] [-w warmup]\n");
			return 2;
		}
	}
	if (n < 1 || steps < 1 || warmup < 0) {
		fprintf(stderr, "ddp: bad arguments\n");
		return 2;
	}
	MPI_Init(&argc, &argv);
	int rank, p;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &p);
	if (p > 100000) {
		if (rank == 0)
			fprintf(stderr, "ddp: too many ranks for exact float sums\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	int total = warmup + steps;
	float *grad = malloc(n * sizeof(float));
	float *w = malloc(n * sizeof(float));
	double *step_us = calloc(total, sizeof(double));
	double *ar_us = calloc(total, sizeof(double));
	if (!grad || !w || !step_us || !ar_us) {
		fprintf(stderr, "ddp: rank %d: out of memory\n", rank);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	for (long i = 0; i < n; i++)
		w[i] = 0.0f;
	long long R[3] = {0, 0, 0};
	for (int k = 0; k < 3; k++)
		for (int r = 0; r < p; r++)
			R[k] += (r + k) % 3;
	long long errors = 0, checked = 0;
	const float lr = 1.0f / 1024;
	MPI_Barrier(MPI_COMM_WORLD);
	for (int s = 0; s < total; s++) {
		double t0 = now_us();
		/* The backward pass: this rank's gradients for step s. */
		for (long i = 0; i < n; i++)
			grad[i] = (float)(hval(i, s) - 8 + (rank + i) % 3);
		double t1 = now_us();
		MPI_Allreduce(MPI_IN_PLACE, grad, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		double t2 = now_us();
		/* The optimizer step: plain SGD on the averaged gradient. */
		const float scale = lr / p;
		for (long i = 0; i < n; i++)
			w[i] -= scale * grad[i];
		double t3 = now_us();
		step_us[s] = t3 - t0;
		ar_us[s] = t2 - t1;
		/* The check, untimed: every element, exactly. */
		long long e = 0;
		for (long i = 0; i < n; i++) {
			long long want = (long long)p * (hval(i, s) - 8) + R[i % 3];
			if (grad[i] != (float)want) {
				if (e < 3)
					fprintf(stderr, "ddp: rank %d step %d element %ld: %.1f, want %lld\n",
						rank, s, i, grad[i], want);
				e++;
			}
		}
		errors += e;
		checked += n;
	}
	double *max_step = calloc(total, sizeof(double)), *max_ar = calloc(total, sizeof(double));
	long long tot_err = 0, tot_checked = 0;
	MPI_Reduce(step_us, max_step, total, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
	MPI_Reduce(ar_us, max_ar, total, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
	MPI_Reduce(&errors, &tot_err, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
	MPI_Reduce(&checked, &tot_checked, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
	if (rank == 0) {
		printf("ddp config ranks %d floats %ld steps %d warmup %d\n", p, n, steps, warmup);
		for (int s = 0; s < total; s++)
			printf("ddp step %d warmup %d step_us %.1f allreduce_us %.1f\n", s, s < warmup, max_step[s], max_ar[s]);
		printf("ddp result errors %lld checked %lld\n", tot_err, tot_checked);
		fflush(stdout);
	}
	/* The weights are used, so the optimizer step is not optimised away. */
	volatile float sink = w[0] + w[n / 2] + w[n - 1];
	(void)sink;
	/* Every rank learns the verdict, so the exit status says it. */
	MPI_Bcast(&tot_err, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
	free(grad);
	free(w);
	MPI_Finalize();
	return tot_err == 0 ? 0 : 1;
}
