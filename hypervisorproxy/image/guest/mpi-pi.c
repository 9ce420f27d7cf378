/*
 * mpi-pi: pi by the midpoint rule on 4/(1+x^2) over [0,1], split among the
 * ranks of an MPI job, summed with MPI_Reduce on rank 0; MPI_Allgather and
 * MPI_Allreduce count the distinct hosts the ranks ran on.
 *
 *   mpirun --hostfile /etc/metasched/hostfile mpi-pi [INTERVALS [ROUNDS]]
 *
 * Every rank prints its rank and host; rank 0 prints the result of each
 * round (ROUNDS, default 1, a second apart: a job that runs a while):
 *
 *   rank 0 of 4 on j-7-a1-m
 *   round 1 of 1: pi = 3.141592653589793 (error 2.2e-16)
 *   pi = 3.141592653589793 (error 2.2e-16) from 4 ranks on 4 hosts, 10000000 intervals
 *
 * The metasched guest image builds it with mpicc into /usr/local/bin/mpi-pi
 * (docs/internals/images.md, "The Debian image"); a job may ship its own
 * program as an input file and build it the same way.
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);

	long n = 10000000, rounds = 1;
	for (int a = 1; a < argc && a < 3; a++) {
		char *end;
		long v = strtol(argv[a], &end, 10);
		if (*end != '\0' || v < 1) {
			if (rank == 0)
				fprintf(stderr, "mpi-pi: %s: must be a whole number >= 1, not '%s'\n", a == 1 ? "INTERVALS" : "ROUNDS", argv[a]);
			MPI_Finalize();
			return 2;
		}
		if (a == 1)
			n = v;
		else
			rounds = v;
	}

	char host[MPI_MAX_PROCESSOR_NAME];
	int len;
	MPI_Get_processor_name(host, &len);
	printf("rank %d of %d on %s\n", rank, size, host);
	fflush(stdout);

	double pi = 0.0;
	for (long r = 1; r <= rounds; r++) {
		double h = 1.0 / (double)n, sum = 0.0;
		for (long i = rank; i < n; i += size) {
			double x = h * ((double)i + 0.5);
			sum += 4.0 / (1.0 + x * x);
		}
		double part = h * sum;
		MPI_Reduce(&part, &pi, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
		if (rank == 0) {
			printf("round %ld of %ld: pi = %.15f (error %.1e)\n", r, rounds, pi, fabs(pi - 3.14159265358979323846));
			fflush(stdout);
		}
		if (r < rounds)
			sleep(1);
		MPI_Barrier(MPI_COMM_WORLD);
	}

	/* The distinct hosts: a rank counts 1 when no lower rank has its host. */
	char *names = malloc((size_t)size * MPI_MAX_PROCESSOR_NAME);
	if (names == NULL)
		MPI_Abort(MPI_COMM_WORLD, 1);
	MPI_Allgather(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, MPI_COMM_WORLD);
	int first = 1;
	for (int r = 0; r < rank; r++)
		if (strncmp(names + (size_t)r * MPI_MAX_PROCESSOR_NAME, host, MPI_MAX_PROCESSOR_NAME) == 0)
			first = 0;
	int hosts = 0;
	MPI_Allreduce(&first, &hosts, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	free(names);

	if (rank == 0)
		printf("pi = %.15f (error %.1e) from %d ranks on %d hosts, %ld intervals\n",
		       pi, fabs(pi - 3.14159265358979323846), size, hosts, n);
	MPI_Finalize();
	return 0;
}
