/* spec_check.c - an independent, serial, O(N^2)-list restatement of what the
 * miniMD reference computes for its LJ benchmark (see README.md, "How the
 * reference computes it").  Not part of any build; it exists to show that the
 * description in README.md is complete: it reproduces the stored reference
 * thermo output to ~1e-14 relative.
 *
 *   cc -std=c11 -O2 -Wall -Wextra -o spec_check spec_check.c -lm
 *   ./spec_check NX NY NZ [NSTEPS [THERMO_EVERY]]   e.g. ./spec_check 5 5 5
 *
 * Prints "step T PE/atom P" lines like the reference's thermo table.
 * Set SPEC_NOLIST=1 to skip the Verlet list (exact 2.5 cutoff every step):
 * the result then departs from the reference by ~1e-6 from step 20-40 on.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static double park_miller(int *seed) /* as ref/setup.cpp:random() */
{
  int k = *seed / 127773;
  *seed = 16807 * (*seed - k * 127773) - 2836 * k;
  if (*seed < 0) *seed += 2147483647;
  return (1.0 / 2147483647) * *seed;
}

int main(int argc, char **argv)
{
  if (argc < 4) { fprintf(stderr, "usage: %s NX NY NZ [NSTEPS [EVERY]]\n", argv[0]); return 1; }
  const int nx = atoi(argv[1]), ny = atoi(argv[2]), nz = atoi(argv[3]);
  const int nsteps = argc > 4 ? atoi(argv[4]) : 100, every = argc > 5 ? atoi(argv[5]) : 10;
  const double rho = 0.8442, t0 = 1.44, dt = 0.005, rc = 2.5, rn = 2.5 + 0.3;
  const int reneigh = 20, use_list = getenv("SPEC_NOLIST") == NULL;
  const double alat = pow(4.0 / rho, 1.0 / 3.0);
  const double box[3] = {nx * alat, ny * alat, nz * alat};
  const int n = 4 * nx * ny * nz;
  double *x = malloc(sizeof(double) * 3 * n), *v = malloc(sizeof(double) * 3 * n);
  double *f = malloc(sizeof(double) * 3 * n);
  int natom = 0;

  /* fcc sites = even (i+j+k) points of the half-spacing grid; order is irrelevant */
  for (int k = 0; k < 2 * nz; k++)
    for (int j = 0; j < 2 * ny; j++)
      for (int i = 0; i < 2 * nx; i++) {
        if ((i + j + k) % 2) continue;
        double *xa = x + 3 * natom, *va = v + 3 * natom;
        xa[0] = 0.5 * alat * i; xa[1] = 0.5 * alat * j; xa[2] = 0.5 * alat * k;
        int seed = k * (2 * ny) * (2 * nx) + j * (2 * nx) + i + 1;
        for (int c = 0; c < 3; c++) {
          for (int m = 0; m < 5; m++) park_miller(&seed);
          va[c] = park_miller(&seed);
        }
        natom++;
      }
  double vcm[3] = {0, 0, 0}, mv2 = 0;
  for (int i = 0; i < n; i++) for (int c = 0; c < 3; c++) vcm[c] += v[3 * i + c];
  for (int i = 0; i < n; i++) for (int c = 0; c < 3; c++) v[3 * i + c] -= vcm[c] / n;
  for (int i = 0; i < 3 * n; i++) mv2 += v[i] * v[i];
  const double scale = sqrt(t0 / (mv2 / (3 * n - 3)));
  for (int i = 0; i < 3 * n; i++) v[i] *= scale;

  const double vol = box[0] * box[1] * box[2];
  int npair = 0, cap = 0, *pi = NULL, *pj = NULL;
  double *shift = NULL;
  for (int step = 0; step <= nsteps; step++) {
    if (step > 0)                      /* initialIntegrate */
      for (int i = 0; i < 3 * n; i++) { v[i] += 0.5 * dt * f[i]; x[i] += dt * v[i]; }
    if (step % reneigh == 0 || !use_list) {   /* neighbor build: pair set and image frozen */
      npair = 0;
      for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
          double d[3], s[3], r2 = 0;
          for (int c = 0; c < 3; c++) {
            d[c] = x[3 * i + c] - x[3 * j + c];
            s[c] = box[c] * round(d[c] / box[c]);
            d[c] -= s[c]; r2 += d[c] * d[c];
          }
          if (r2 > (use_list ? rn * rn : rc * rc)) continue;
          if (npair == cap) {
            cap = 2 * cap + 4096;
            pi = realloc(pi, sizeof(int) * cap); pj = realloc(pj, sizeof(int) * cap);
            shift = realloc(shift, sizeof(double) * 3 * cap);
          }
          pi[npair] = i; pj[npair] = j;
          for (int c = 0; c < 3; c++) shift[3 * npair + c] = s[c];
          npair++;
        }
    }
    double epair = 0, virial = 0;
    for (int i = 0; i < 3 * n; i++) f[i] = 0;
    for (int p = 0; p < npair; p++) {
      const int i = pi[p], j = pj[p];
      double d[3], r2 = 0;
      for (int c = 0; c < 3; c++) { d[c] = x[3 * i + c] - x[3 * j + c] - shift[3 * p + c]; r2 += d[c] * d[c]; }
      if (r2 >= rc * rc) continue;
      const double sr2 = 1.0 / r2, sr6 = sr2 * sr2 * sr2;
      const double fpair = 48.0 * sr6 * (sr6 - 0.5) * sr2;
      for (int c = 0; c < 3; c++) { f[3 * i + c] += d[c] * fpair; f[3 * j + c] -= d[c] * fpair; }
      epair += 4.0 * sr6 * (sr6 - 1.0);
      virial += r2 * fpair;
    }
    if (step > 0)                      /* finalIntegrate */
      for (int i = 0; i < 3 * n; i++) v[i] += 0.5 * dt * f[i];
    if (step % every == 0) {
      mv2 = 0;
      for (int i = 0; i < 3 * n; i++) mv2 += v[i] * v[i];
      printf("%d %.15e %.15e %.15e\n", step, mv2 / (3 * n - 3), epair / n, (mv2 + virial) / (3 * vol));
    }
  }
  free(x); free(v); free(f); free(pi); free(pj); free(shift);
  return 0;
}
