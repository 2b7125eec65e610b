import numpy as np, sys
from sklearn.ensemble import GradientBoostingRegressor
rows=[l.rstrip('\n').split('\t') for l in open(sys.argv[1])]
h=rows[0]; rows=rows[1:]
col={n:i for i,n in enumerate(h)}
def arr(name): return np.array([float(r[col[name]]) for r in rows])
sets=np.array([r[0] for r in rows])
print('sets', {s:(sets==s).sum() for s in set(sets)})
y=arr('cpu_seconds')
feats=['terms','shortest','second_shortest','total','total_blocks','and_estimate']
X=np.column_stack([np.log1p(arr(f)) for f in feats])
tr=sets=='train'; te=sets=='test'
if tr.sum()<50:  # split
    idx=np.arange(len(y)); tr=idx%2==0; te=~tr
def mre(p,t): return np.mean(np.abs(p-t)/t)
def best_scale(p,t):
    best=min(np.exp(np.linspace(-3,3,601)), key=lambda s: mre(s*p,t)); return best
# log-linear
A=np.column_stack([X,np.ones(len(y))])
w,*_=np.linalg.lstsq(A[tr],np.log(y[tr]),rcond=None)
p=np.exp(A@w); s=best_scale(p[tr],y[tr])
print('loglinear all-features MRE train %.3f test %.3f'%(mre(s*p[tr],y[tr]),mre(s*p[te],y[te])))
g=GradientBoostingRegressor(loss='absolute_error',n_estimators=300,max_depth=3,learning_rate=0.05)
g.fit(X[tr],np.log(y[tr])); p=np.exp(g.predict(X)); s=best_scale(p[tr],y[tr])
print('gbm MRE train %.3f test %.3f'%(mre(s*p[tr],y[tr]),mre(s*p[te],y[te])))
if 'or_ran' in col:
    X2=np.column_stack([X,arr('or_ran')])
    g.fit(X2[tr],np.log(y[tr])); p=np.exp(g.predict(X2)); s=best_scale(p[tr],y[tr])
    print('gbm + or_ran (oracle) MRE train %.3f test %.3f'%(mre(s*p[tr],y[tr]),mre(s*p[te],y[te])))
extra=[c for c in h if c not in feats+['set','cpu_seconds','gpu_seconds','or_ran']]
if extra:
    X3=np.column_stack([X]+[np.log1p(np.maximum(arr(f),0)) for f in extra])
    g.fit(X3[tr],np.log(y[tr])); p=np.exp(g.predict(X3)); s=best_scale(p[tr],y[tr])
    print('gbm + extra',extra,'MRE train %.3f test %.3f'%(mre(s*p[tr],y[tr]),mre(s*p[te],y[te])))
    A3=np.column_stack([X3,np.ones(len(y))])
    w,*_=np.linalg.lstsq(A3[tr],np.log(y[tr]),rcond=None)
    p=np.exp(A3@w); s=best_scale(p[tr],y[tr])
    print('loglinear + extra MRE train %.3f test %.3f'%(mre(s*p[tr],y[tr]),mre(s*p[te],y[te])))
from sklearn.ensemble import GradientBoostingClassifier
o=arr('or_ran')
c=GradientBoostingClassifier(n_estimators=200,max_depth=3).fit(X[tr],o[tr])
print('or_ran rate %.3f, classifier accuracy test %.3f (always-majority %.3f)'%(o.mean(), (c.predict(X[te])==o[te]).mean(), max(o[te].mean(),1-o[te].mean())))
for t in (1,2,3,4):
    m=(arr('terms')==t) if t<4 else (arr('terms')>=4)
    print(' terms',t,'n',m.sum(),'or_ran %.2f'%o[m].mean(), 'cpu ms mean %.3f'%(1000*y[m].mean()))
from sklearn.linear_model import LogisticRegression
def loglin_fit(Xa,ya):
    A=np.column_stack([Xa,np.ones(len(ya))]); w,*_=np.linalg.lstsq(A,np.log(ya),rcond=None); return w
def loglin_pred(w,Xa): return np.exp(np.column_stack([Xa,np.ones(len(Xa))])@w)
terms=arr('terms')
def split_models(Xa, mask_tr):
    ws={}
    for orr in (0,1):
        m=mask_tr&(o==orr); ws[orr]=loglin_fit(Xa[m],y[m])
    return ws
ws=split_models(X,tr)
p_oracle=np.where(o==1, loglin_pred(ws[1],X), loglin_pred(ws[0],X))
s=best_scale(p_oracle[tr],y[tr]); print('loglinear split by or_ran (oracle) test %.3f'%mre(s*p_oracle[te],y[te]))
lr=LogisticRegression(max_iter=2000).fit(X[tr],o[tr])
print('logistic or_ran accuracy test %.3f'%(lr.predict(X[te])==o[te]).mean())
pr=lr.predict_proba(X)[:,1]
p_hard=np.where(pr>0.5, loglin_pred(ws[1],X), loglin_pred(ws[0],X))
s=best_scale(p_hard[tr],y[tr]); print('loglinear split, logistic hard choice test %.3f'%mre(s*p_hard[te],y[te]))
p_mix=pr*loglin_pred(ws[1],X)+(1-pr)*loglin_pred(ws[0],X)
s=best_scale(p_mix[tr],y[tr]); print('loglinear split, logistic expectation test %.3f'%mre(s*p_mix[te],y[te]))
