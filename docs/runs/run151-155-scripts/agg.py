import csv, sys, re, collections
rows = list(csv.reader(open(sys.argv[1])))
hdr = rows[1]; data = rows[2:]
iS = hdr.index("Warp Stall Sampling (All Samples)"); iE = hdr.index("Instructions Executed")
stall_cols = [i for i,h in enumerate(hdr) if h.startswith("stall_") or "Stall" in h]
tot = sum(int(r[iS]) for r in data if r[iS].isdigit())
print("total samples", tot, "instructions", len(data))
op = collections.Counter()
for r in data:
    if not r[iS].isdigit(): continue
    s = r[1].strip(); s = re.sub(r"^@!?U?P\w+ ", "", s)
    o = s.split(" ")[0].split(".")[0]
    op[o] += int(r[iS])
for o, n in op.most_common(25): print(f"{o:10s} {n:8d} {100*n/tot:5.1f}%")
# region view: cumulative samples in chunks of 64 instructions
print("--- chunks of 100 instructions: samples, top opcodes")
for c in range(0, len(data), 100):
    ch = data[c:c+100]; n = sum(int(r[iS]) for r in ch if r[iS].isdigit())
    if n < tot*0.005: continue
    oc = collections.Counter()
    for r in ch:
        s = re.sub(r"^@!?U?P\w+ ", "", r[1].strip()); oc[s.split(" ")[0]] += int(r[iS]) if r[iS].isdigit() else 0
    print(f"{c:6d} {100*n/tot:5.1f}%  " + " ".join(f"{k}:{v}" for k,v in oc.most_common(6)))
