#!/usr/bin/env python3
"""hostprof.py FILE [options] — the report of a hostprof.so run (see hostprof.c).

Per thread: samples, and the share not idle (the interrupted instruction not in a wait of
libc: poll, futex, sleep...). For the busiest threads (--threads N, or --tid T):
  leaf        where the samples landed: object:function, % of the thread's samples
  inclusive   each of the program's and the runtime's functions (own objects, --own): % of
              samples with it anywhere on the stack
  own -> lib  the innermost own function and the object the sample landed in (the GPU driver,
              libc, itself): which runtime function spends its time in which library
  --callers F its callers, 3 own frames up;  --callees F what lies below it, 3 frames down
Functions of own objects are named by addr2line from their debug information (the objects must
be at the same paths here as where the program ran); the others by their nearest dynamic symbol,
'?' when they export none (a stripped GPU driver: count it by object)."""
import argparse
import collections
import os
import subprocess
import sys

IDLE = ('poll', 'epoll', 'futex', 'nanosleep', 'sem_', 'select', 'pthread_cond', 'sched_yield',
        'recv', 'read', 'accept', 'pause', 'sigtimedwait', 'syscall')


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('file')
    ap.add_argument('--tid', type=int, action='append', help='threads to report (default: busiest)')
    ap.add_argument('--threads', type=int, default=1, help='report the N busiest threads')
    ap.add_argument('--top', type=int, default=25, help='lines a table')
    ap.add_argument('--own', default='libtessera,_tess,_mpi,bench_,test_',
                    help='comma-separated substrings of the paths of own objects')
    ap.add_argument('--callers', action='append', default=[], metavar='F')
    ap.add_argument('--callees', action='append', default=[], metavar='F')
    a = ap.parse_args()
    own_keys = [k for k in a.own.split(',') if k]

    samples, addrs, exe = [], {}, '?'
    with open(a.file) as f:
        for line in f:
            p = line.split()
            if not p:
                continue
            if p[0] == 'E':
                exe = p[1]
            elif p[0] == 'S':
                tid, n = int(p[1]), int(p[2])
                st = [int(x, 16) for x in p[3:3 + n]]
                pc, rest = st[0], st[1:]
                # the handler's frames come first: the interrupted PC reappears after them
                rest = rest[rest.index(pc) + 1:] if pc in rest else rest[2:]
                samples.append((tid, [pc] + rest))
            elif p[0] == 'A':
                addrs[int(p[1], 16)] = (p[2], int(p[3], 16), p[4] if len(p) > 4 else '?')
    if not samples:
        sys.exit('hostprof.py: no samples in %s' % a.file)

    def is_own(obj):
        return any(k in obj for k in own_keys)

    # addr2line for own objects; a return address is looked up one byte back (inside the call)
    leafs = set(st[0] for _, st in samples)
    byobj = collections.defaultdict(set)
    for ad, (obj, off, _) in addrs.items():
        if obj != '?' and is_own(obj) and os.path.exists(obj):
            byobj[obj].add((off, ad in leafs))
    names = {}
    for obj, offs in byobj.items():
        offs = sorted(offs)
        q = ['%x' % (o if leaf else max(o - 1, 0)) for o, leaf in offs]
        r = subprocess.run(['addr2line', '-f', '-e', obj] + q, capture_output=True, text=True)
        out = r.stdout.split('\n')
        for i, (o, leaf) in enumerate(offs):
            fn = out[2 * i] if 2 * i < len(out) else '??'
            names[(obj, o)] = fn
    def sym(ad):
        obj, off, s = addrs.get(ad, ('?', 0, '?'))
        n = names.get((obj, off))
        return os.path.basename(obj), (n if n and n != '??' else s)

    def own(ad):
        return is_own(addrs.get(ad, ('?',))[0])

    def idle(st):
        o, s = sym(st[0])
        return o.startswith('libc') and any(k in s for k in IDLE)

    per = collections.defaultdict(list)
    for tid, st in samples:
        per[tid].append(st)
    busy = {t: sum(not idle(s) for s in ss) for t, ss in per.items()}
    print('%s: %d threads, %d samples' % (exe, len(per), len(samples)))
    for t, ss in sorted(per.items(), key=lambda kv: -busy[kv[0]]):
        outer = collections.Counter()
        for s in ss:
            o = [sym(x)[1] for x in s if own(x)]
            if len(o) >= 3:
                outer[o[-3]] += 1
        print('  thread %d: %d samples, %.0f%% not idle%s' % (
            t, len(ss), 100.0 * busy[t] / len(ss),
            '; in ' + ', '.join(k for k, _ in outer.most_common(2)) if outer else ''))
    tids = a.tid or sorted(per, key=lambda t: -busy[t])[:a.threads]
    for t in tids:
        ss, N = per[t], float(len(per[t]))
        print('\n=== thread %d: %d samples' % (t, N))
        print('-- leaf (object:function)')
        for k, v in collections.Counter('%s:%s' % sym(s[0]) for s in ss).most_common(a.top):
            print('%6.2f%%  %s' % (100 * v / N, k))
        objs = collections.Counter(sym(s[0])[0] for s in ss)
        print('-- leaf object: ' + ', '.join('%s %.1f%%' % (k, 100 * v / N)
                                            for k, v in objs.most_common(8)))
        inc = collections.Counter()
        for s in ss:
            inc.update(set(sym(x)[1] for x in s if own(x)))
        print('-- inclusive (own functions)')
        for k, v in inc.most_common(a.top):
            print('%6.2f%%  %s' % (100 * v / N, k))
        edge = collections.Counter()
        for s in ss:
            fo = next((x for x in s if own(x)), None)
            if fo is not None:
                edge['%s -> %s' % (sym(fo)[1], 'itself' if own(s[0]) else sym(s[0])[0])] += 1
        print('-- innermost own function -> object of the leaf')
        for k, v in edge.most_common(a.top):
            print('%6.2f%%  %s' % (100 * v / N, k))
        for F in a.callers:
            c = collections.Counter()
            for s in ss:
                o = [sym(x)[1] for x in s if own(x)]
                if F in o:
                    i = o.index(F)
                    c[' <- '.join(o[i:i + 4])] += 1
            print('-- callers of %s' % F)
            for k, v in c.most_common(a.top):
                print('%6.2f%%  %s' % (100 * v / N, k))
        for F in a.callees:
            c = collections.Counter()
            for s in ss:
                fr = [sym(x)[1] if own(x) else sym(x)[0] for x in s]
                if F in fr:
                    i = fr.index(F)
                    c[' -> '.join(reversed(fr[max(0, i - 3):i + 1]))] += 1
            print('-- callees of %s' % F)
            for k, v in c.most_common(a.top):
                print('%6.2f%%  %s' % (100 * v / N, k))


if __name__ == '__main__':
    main()
