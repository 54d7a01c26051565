import json,sys,glob,statistics as st
#!/usr/bin/env python3
# Compares two sigbench binaries run interleaved: DIR holds old-N.json and
# new-N.json (sigbench --json), one per run. Prints, per retiring-tracker
# row, the median of the runs' p50s with their range, new/old, and flags a
# row whose new range lies wholly above the old one (slower beyond the
# runs' spread).
#   python3 benches/results/compare.py benches/results/queue-rebuild-h200
d=sys.argv[1]
def load(kind):
    runs=[json.load(open(f)) for f in sorted(glob.glob(f"{d}/{kind}-*.json"))]
    out={}
    for r in runs:
        for row in r['rows']:
            k=(row['api'],row['tracker'],row['signals'])
            out.setdefault(k,{'p50':[],'sub':[],'cpu':[]})
            out[k]['p50'].append(row['p50_us']); out[k]['sub'].append(row.get('with_submission_p50_us') or 0); out[k]['cpu'].append(row['cpu_us_per_op'])
    return out,len(runs)
old,no=load('old'); new,nn=load('new')
print(f"{no} old runs, {nn} new runs, interleaved; p50 us: median of runs [min-max]; ratio new/old of medians; 'beyond spread' when the new range lies wholly above the old one")
print(f"{'row':48} {'old p50':>22} {'new p50':>22} {'new/old':>8}  {'w/ submission new/old':>21}")
worse=0
for k in old:
    if k not in new or k[1]!='retiring': continue
    o=old[k]['p50']; n=new[k]['p50']
    mo, mn = st.median(o), st.median(n)
    so, sn = st.median(old[k]['sub']), st.median(new[k]['sub'])
    flag = "  beyond spread" if min(n) > max(o) else ""
    if flag: worse+=1
    print(f"{'/'.join(k):48} {mo:8.2f} [{min(o):.2f}-{max(o):.2f}] {mn:8.2f} [{min(n):.2f}-{max(n):.2f}] {mn/mo if mo else 0:8.2f}  {(sn/so if so else 0):21.2f}{flag}")
print(f"rows slower beyond the runs' spread: {worse}")
