import numpy as np, sys
from sklearn.ensemble import GradientBoostingRegressor
f=sys.argv[1]
hdr=open(f).readline().rstrip('\n').split('\t')
rows=[l.rstrip('\n').split('\t') for l in open(f)][1:]
col={h:i for i,h in enumerate(hdr)}
S=np.array([r[0] for r in rows]); A={h:np.array([float(r[col[h]]) for r in rows]) for h in hdr[1:]}
tr=S=='train'; te=S=='test'
print('train',tr.sum(),'test',te.sum())
L=lambda v: np.log1p(v)
base=np.c_[A['terms'],L(A['shortest']),L(A['second_shortest']),L(A['total']),L(A['total_blocks']),np.log(A['and_estimate']+1e-30)]
prun=np.c_[base,A['seed_ratio'],A['stop_fraction'],L(A['bounded_total']),L(A['bounded_shortest'])]
def mre(p,y): return np.mean(np.abs(p-y)/y)
def best_scale(p,y):
    r=y/p; w=p/y; o=np.argsort(r); cw=np.cumsum(w[o]); return r[o][np.searchsorted(cw,cw[-1]/2)]
def fit(F,y,seed):
    a=GradientBoostingRegressor(n_estimators=50,max_depth=3,learning_rate=0.25,random_state=seed).fit(F[tr],np.log(y[tr]))
    s=best_scale(np.exp(a.predict(F[tr])),y[tr]); return mre(s*np.exp(a.predict(F[te])),y[te])
for proc in ['cpu','gpu']:
    y=A[proc+'_seconds']
    work=np.c_[L(A[proc+'_postings']),L(A[proc+'_docs_scored'])]
    orr=A['or_ran'][:,None]
    for name,F in [('base',base),('base+or(oracle)',np.c_[base,orr]),('pruning',prun),('pruning+or(oracle)',np.c_[prun,orr]),('work(oracle)',work),('base+work(oracle)',np.c_[base,work])]:
        print(proc,name,'%.3f'%np.mean([fit(F,y,s) for s in range(3)]))
