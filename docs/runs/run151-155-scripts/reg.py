import csv, sys, re, collections
rows = list(csv.reader(open(sys.argv[1])))
hdr = rows[1]; data = rows[2:]
iS = hdr.index("Warp Stall Sampling (All Samples)")
sc = [(i,h) for i,h in enumerate(hdr) if h.startswith("stall_") and "Not Issued" not in h]
tot = sum(int(r[iS]) for r in data if r[iS].isdigit())
bounds = [int(x) for x in sys.argv[2].split(",")]
for a,b in zip(bounds, bounds[1:]):
    ch = data[a:b]; n = sum(int(r[iS]) for r in ch if r[iS].isdigit())
    st = collections.Counter()
    for r in ch:
        for i,h in sc:
            if r[i].isdigit(): st[h[6:]] += int(r[i])
    print(f"{a:6d}-{b:6d} {100*n/tot:5.1f}%  " + " ".join(f"{k}:{100*v/max(n,1):.0f}" for k,v in st.most_common(5)))
