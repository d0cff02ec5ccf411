#!/usr/bin/env python3
"""Parse the stored miniMD reference runs (*.txt in this folder).

  python3 compare.py csv     > thermo.csv       case,step,temp,pe,pressure
  python3 compare.py summary                    agreement table (markdown)
  python3 compare.py steps   > agreement.txt    per-step differences
A thermo row is each 5-field line after "# Timestep T U P Time"
(step, T, PE per atom, P, elapsed seconds).
"""
import glob
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

PAIRS = [  # (a, b): same physics, different rank count or code path
    ('lj-s5-np1', 'lj-s5-np2'), ('lj-s8-np1', 'lj-s8-np2'), ('lj-s8-np1', 'lj-s8-np4'),
    ('lj-s20-np1', 'lj-s20-np2'), ('lj-nx6ny7nz9-np1', 'lj-nx6ny7nz9-np3'),
    ('lj-s8-thermo1-np1', 'lj-s8-thermo1-np2'),
    ('lj-s8-np1', 'opt-s8-fullneigh-np1'), ('lj-s8-np1', 'opt-s8-fullneigh-np2'),
    ('lj-s8-np1', 'opt-s8-origforce-np1'), ('lj-s8-np1', 'opt-s8-ghostnewton0-np2'),
    ('lj-s8-np1', 'opt-s8-nosort-np1')]


def parse(path):
    rows, on = [], False
    with open(path) as fh:
        for line in fh:
            if line.startswith('# Timestep T U P'):
                on = True
                continue
            if on:
                p = line.split()
                if len(p) != 5:
                    break
                rows.append((int(p[0]), float(p[1]), float(p[2]), float(p[3])))
    return rows


def load():
    return {os.path.basename(f)[:-4]: parse(f)
            for f in sorted(glob.glob(os.path.join(HERE, '*.txt')))
            if parse(f)}


def rel(a, b):
    return abs(a - b) / abs(a)


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else 'summary'
    data = load()
    if mode == 'csv':
        print('case,step,temp,pe,pressure')
        for c, rows in data.items():
            for s, t, e, p in rows:
                print(f'{c},{s},{t:.15e},{e:.15e},{p:.15e}')
    elif mode == 'steps':
        print('# per-step differences; rel = |a-b|/|a|; P also absolute (P crosses zero)')
        for a, b in PAIRS:
            A, B = {r[0]: r for r in data[a]}, {r[0]: r for r in data[b]}
            print(f'\n{a} vs {b}\n# step   T_rel     PE_rel    P_rel     P_abs')
            for s in sorted(set(A) & set(B)):
                print(f'{s:5d}  {rel(A[s][1], B[s][1]):.2e}  {rel(A[s][2], B[s][2]):.2e}'
                      f'  {rel(A[s][3], B[s][3]):.2e}  {abs(A[s][3] - B[s][3]):.2e}')
    else:
        print('| a | b | T @0 | PE @0 | P @0 | T @100 | PE @100 | P @100 |'
              ' max over steps: T / PE / P abs |')
        print('|---|---|---|---|---|---|---|---|---|')
        for a, b in PAIRS:
            A, B = {r[0]: r for r in data[a]}, {r[0]: r for r in data[b]}
            common = sorted(set(A) & set(B))
            vals = [rel(A[0][k], B[0][k]) for k in (1, 2, 3)]
            vals += [rel(A[100][k], B[100][k]) for k in (1, 2, 3)]
            mt = max(rel(A[s][1], B[s][1]) for s in common)
            me = max(rel(A[s][2], B[s][2]) for s in common)
            mp = max(abs(A[s][3] - B[s][3]) for s in common)
            print(f'| {a} | {b} | ' + ' | '.join(f'{x:.1e}' for x in vals)
                  + f' | {mt:.1e} / {me:.1e} / {mp:.1e} |')


if __name__ == '__main__':
    main()
