import json,sys,statistics as st
for f in sys.argv[1:]:
    d=json.load(open(f))
    B=d['timeline']['batches'][5:-3]
    mx=[];mean=[];idle=[];gapsum=0
    prev_end={}
    for b in B:
        c=[i['end']-i['start'] for i in b['isn']]
        mx.append(max(c)); mean.append(sum(c)/len(c))
        for i in b['isn']:
            r=i['rank']
            if r in prev_end: idle.append(max(0,i['start']-prev_end[r]))
            prev_end[r]=i['end']
    n=len(B[0]['isn'])
    print(f[:40].ljust(40), n, 'max %.2f mean %.2f skew %.1f%% idle/isn/batch %.2f ms cycle %.2f' % (st.mean(mx), st.mean(mean), 100*(st.mean(mx)/st.mean(mean)-1), st.mean(idle), (B[-1]['isn'][0]['end']-B[0]['isn'][0]['start'])/(len(B)-1)))
