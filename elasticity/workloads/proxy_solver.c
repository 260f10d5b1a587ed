/*
 * proxy_solver.c - a small MPI proxy for a CFD solver, for fast profiling tests.
 *
 * A 2-D Jacobi (5-point stencil) relaxation on an NX x NY grid, split into horizontal bands, one per rank.
 * Band heights follow a weight vector, so the decomposition can be as imbalanced as a concentric split of
 * an aerofoil mesh: heavy ("dense", near-wall) ranks compute much more per iteration than light ("sparse",
 * far-field) ones, and the light ranks wait for them inside MPI. Every iteration: halo exchange with the
 * neighbours (MPI_Sendrecv), a global residual (MPI_Allreduce), and one MPI_Barrier that marks the end of the
 * iteration, as the PMPI duty-cycle analysis expects.
 *
 * usage: proxy_solver ITERATIONS NX ROWS_PER_WEIGHT WEIGHTS
 *   WEIGHTS is a comma-separated list with one weight per rank (e.g. 1,1,5,15); rank r gets
 *   ROWS_PER_WEIGHT * w_r rows. Prints the final residual and each rank's rows on rank 0.
 *   With PROXY_PROGRESS_EVERY=N in the environment, rank 0 also prints "iteration K" every N iterations
 *   (flushed), the progress stream the multiplexing controller reads to compare simulations' speeds; with
 *   MC_PROGRESS_FILE=PATH those lines are appended to PATH instead (every 10 iterations unless N is given),
 *   which the controller can read while the job runs.
 */
#include <mpi.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse_weights(const char *text, int *out, int max)
{
    int count = 0;
    const char *p = text;
    while (*p && count < max) {
        char *end;
        long value = strtol(p, &end, 10);
        if (end == p || value < 1)
            return -1;
        out[count++] = (int)value;
        p = (*end == ',') ? end + 1 : end;
        if (*end != ',' && *end != '\0')
            return -1;
    }
    return count;
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 5) {
        if (rank == 0)
            fprintf(stderr, "usage: %s ITERATIONS NX ROWS_PER_WEIGHT WEIGHTS(w0,w1,...)\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int iterations = atoi(argv[1]);
    int nx = atoi(argv[2]);
    int rows_per_weight = atoi(argv[3]);
    int weights[4096];
    int nweights = parse_weights(argv[4], weights, 4096);
    if (iterations < 1 || nx < 3 || rows_per_weight < 1 || nweights != size) {
        if (rank == 0)
            fprintf(stderr, "proxy_solver: need ITERATIONS>=1, NX>=3, ROWS_PER_WEIGHT>=1 and one weight per rank "
                            "(%d ranks, %d weights)\n", size, nweights);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int rows = rows_per_weight * weights[rank];
    /* rows plus one halo row above and below */
    double *u = calloc((size_t)(rows + 2) * nx, sizeof(double));
    double *v = calloc((size_t)(rows + 2) * nx, sizeof(double));
    if (!u || !v)
        MPI_Abort(MPI_COMM_WORLD, 3);
    /* a hot boundary on the global top edge (rank 0's upper halo), zero elsewhere */
    if (rank == 0)
        for (int i = 0; i < nx; i++)
            u[i] = v[i] = 1.0;
    int up = rank > 0 ? rank - 1 : MPI_PROC_NULL;
    int down = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
    double residual = 0.0;
    const char *every_text = getenv("PROXY_PROGRESS_EVERY");
    const char *progress_path = getenv("MC_PROGRESS_FILE");
    int every = every_text ? atoi(every_text) : (progress_path && *progress_path ? 10 : 0);
    FILE *progress = stdout;
    if (rank == 0 && every > 0 && progress_path && *progress_path) {
        progress = fopen(progress_path, "a");
        if (!progress)
            progress = stdout;
    }
    for (int it = 0; it < iterations; it++) {
        /* halo exchange: my first row goes up, my last row goes down */
        MPI_Sendrecv(&u[1 * nx], nx, MPI_DOUBLE, up, 0, &u[(rows + 1) * nx], nx, MPI_DOUBLE, down, 0,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Sendrecv(&u[rows * nx], nx, MPI_DOUBLE, down, 1, &u[0], nx, MPI_DOUBLE, up, 1, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        if (rank == 0)
            for (int i = 0; i < nx; i++)
                u[i] = 1.0;
        double local = 0.0;
        for (int j = 1; j <= rows; j++) {
            for (int i = 1; i < nx - 1; i++) {
                double next = 0.25 * (u[(j - 1) * nx + i] + u[(j + 1) * nx + i] + u[j * nx + i - 1] + u[j * nx + i + 1]);
                double d = next - u[j * nx + i];
                local += d * d;
                v[j * nx + i] = next;
            }
        }
        double *swap = u;
        u = v;
        v = swap;
        MPI_Allreduce(&local, &residual, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD); /* one per iteration: the profiler's iteration boundary */
        if (rank == 0 && every > 0 && (it + 1) % every == 0) {
            fprintf(progress, "iteration %d\n", it + 1);
            fflush(progress);
        }
    }
    if (rank == 0)
        printf("proxy_solver: %d iterations, residual %.6e, rows per rank:", iterations, sqrt(residual));
    int *all = rank == 0 ? malloc(sizeof(int) * (size_t)size) : NULL;
    MPI_Gather(&rows, 1, MPI_INT, all, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        for (int r = 0; r < size; r++)
            printf(" %d", all[r]);
        printf("\n");
        free(all);
    }
    if (progress != stdout)
        fclose(progress);
    free(u);
    free(v);
    MPI_Finalize();
    return 0;
}
