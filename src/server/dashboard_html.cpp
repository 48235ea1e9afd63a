// The live dashboard: one self-contained page (no build step, no external assets) that polls
// GET /v1/stats once a second and draws the KV block map, request counts, prefix hit rate and
// the TTFT / inter-token latency / throughput history on canvases; with tenants, a table of
// each tenant's requests, tokens and prefix hit rate (admins only: the page and its feed need
// an admin key, or the --admin-port listener).
#include "server/api_server.h"

namespace hinge::server {

const std::string& dashboard_html() {
  static const std::string page = R"HTML(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>hinge dashboard</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:14px system-ui,sans-serif;margin:0;background:#101418;color:#e6e6e6}
header{padding:12px 20px;background:#1a2129;display:flex;gap:24px;align-items:baseline}
header h1{font-size:18px;margin:0} header span{color:#9aa5b1}
main{padding:16px 20px;display:grid;gap:16px;grid-template-columns:repeat(auto-fit,minmax(420px,1fr))}
.card{background:#1a2129;border-radius:8px;padding:12px 16px}
.card h2{font-size:13px;text-transform:uppercase;letter-spacing:.05em;color:#9aa5b1;margin:0 0 8px}
.tiles{display:grid;grid-template-columns:repeat(4,1fr);gap:8px}
.tile{background:#222b35;border-radius:6px;padding:8px}
.tile b{display:block;font-size:22px;font-variant-numeric:tabular-nums}
.tile small{color:#9aa5b1}
canvas{width:100%;display:block}
.legend{margin-bottom:6px} .legend span{display:inline-block;margin-right:14px} h2 span{text-transform:none;letter-spacing:0} .legend i{display:inline-block;width:10px;height:10px;margin-right:4px;border-radius:2px}
#err{color:#ff7b72}
</style></head><body>
<header><h1>hinge</h1><span id="model">connecting…</span><span id="uptime"></span><span id="err"></span></header>
<main>
<section class="card" style="grid-column:1/-1"><h2>Now</h2><div class="tiles">
<div class="tile"><b id="running">–</b><small>running</small></div>
<div class="tile"><b id="waiting">–</b><small>waiting (queue + engine)</small></div>
<div class="tile"><b id="kvuse">–</b><small>KV blocks used</small></div>
<div class="tile"><b id="hit">–</b><small>prefix cache hit rate</small></div>
<div class="tile"><b id="toks">–</b><small>output tok/s</small></div>
<div class="tile"><b id="ttft">–</b><small>mean TTFT</small></div>
<div class="tile"><b id="itl">–</b><small>mean inter-token latency</small></div>
<div class="tile"><b id="rej">–</b><small>accepted / rejected / preemptions</small></div>
<div class="tile"><b id="press">–</b><small>memory pressure (KV usable, reclaimed)</small></div>
</div></section>
<section class="card" style="grid-column:1/-1"><h2>KV block map <span id="kvinfo"></span></h2>
<div class="legend"><span><i style="background:#2d3640"></i>free</span><span><i style="background:#3fb950"></i>cached (evictable)</span><span><i style="background:#58a6ff"></i>used</span><span><i style="background:#d29922"></i>shared</span></div>
<canvas id="map" height="120"></canvas></section>
<section class="card" id="tenants" style="grid-column:1/-1;display:none"><h2>Tenants <span>(requests, tokens and prefix hit rate per tenant; public-prefix hits, quota evictions, TTL expiries)</span></h2><table id="ttab" style="width:100%;border-collapse:collapse;font-variant-numeric:tabular-nums"></table></section>
<section class="card"><h2>Latency (last minutes)</h2><div class="legend"><span><i style="background:#58a6ff"></i>TTFT</span><span><i style="background:#d29922"></i>inter-token</span></div><canvas id="lat" height="200"></canvas></section>
<section class="card"><h2>Throughput and load</h2><div class="legend"><span><i style="background:#3fb950"></i>output tok/s (left)</span><span><i style="background:#58a6ff"></i>running (right)</span><span><i style="background:#ff7b72"></i>waiting (right)</span></div><canvas id="load" height="200"></canvas></section>
</main>
<script>
const $=id=>document.getElementById(id);
const colors={'.':'#2d3640','c':'#3fb950','#':'#58a6ff','S':'#d29922'};
function ms(s){return s>=1?s.toFixed(2)+' s':(s*1000).toFixed(1)+' ms'}
function fit(c){const r=window.devicePixelRatio||1,w=c.clientWidth,h=c.getAttribute('height');c.width=w*r;c.height=h*r;const g=c.getContext('2d');g.scale(r,r);return [g,w,+h]}
// One cell per block, or per k blocks (showing the most used state among them) when the pool
// would not fit in 400 px.
function drawMap(map){const c=$('map');const n=map.length;if(!n)return 1;const w=c.clientWidth,H=400;
 const size=Math.min(14,Math.max(2,Math.floor(Math.sqrt(w*H/n))));const per=Math.max(1,Math.floor(w/size));
 const k=Math.max(1,Math.ceil(n/(per*Math.floor(H/size)))),cells=Math.ceil(n/k),rank={'.':0,c:1,'#':2,S:3};
 c.setAttribute('height',Math.ceil(cells/per)*size);const [g]=fit(c);const gap=size>3?1:0;
 for(let i=0;i<cells;i++){let b='.';for(let j=i*k;j<Math.min(n,i*k+k);j++)if(rank[map[j]]>rank[b])b=map[j];
  g.fillStyle=colors[b]||'#555';g.fillRect((i%per)*size,Math.floor(i/per)*size,size-gap,size-gap);}
 return k}
function nice(m){if(!(m>0))return 1;const p=10**Math.floor(Math.log10(m));for(const f of[1,2,2.5,5,10])if(f*p>=m)return f*p;return 10*p}
// Series with r:1 use the right-hand axis (counts next to rates).
function chart(id,series,fmt,fmt2,interval){const [g,w,h]=fit($(id));g.clearRect(0,0,w,h);const padL=52,padR=fmt2?40:8,top=10,bot=20;
 let ml=0,mr=0;for(const s of series)for(const v of s.v){if(s.r)mr=Math.max(mr,v);else ml=Math.max(ml,v);}ml=nice(ml);mr=nice(mr);
 g.strokeStyle='#2d3640';g.fillStyle='#9aa5b1';g.font='11px system-ui';const ph=h-top-bot,pw=w-padL-padR;
 for(let k=0;k<=4;k++){const y=top+ph-ph*k/4;g.beginPath();g.moveTo(padL,y);g.lineTo(w-padR,y);g.stroke();g.fillText(fmt(ml*k/4),2,y+4);if(fmt2)g.fillText(fmt2(mr*k/4),w-padR+4,y+4);}
 let n=0;for(const s of series)n=Math.max(n,s.v.length);
 if(n>1){g.fillText('-'+Math.round((n-1)*interval)+' s',padL,h-4);g.fillText('now',w-padR-22,h-4);}
 for(const s of series){const m=s.v.length;if(m<2)continue;const mx=s.r?mr:ml;g.strokeStyle=s.c;g.lineWidth=2;g.beginPath();
  s.v.forEach((v,i)=>{const x=padL+pw*(i+n-m)/(n-1),y=top+ph-ph*v/mx;i?g.lineTo(x,y):g.moveTo(x,y)});g.stroke();}}
async function tick(){try{const r=await fetch('/v1/stats',{cache:'no-store'});if(!r.ok)throw new Error('HTTP '+r.status);const s=await r.json();$('err').textContent='';
 $('model').textContent=s.model+(s.draining?' (shutting down)':'');$('uptime').textContent='up '+Math.round(s.uptime_s)+' s';
 const q=s.requests;$('running').textContent=q.running;$('waiting').textContent=q.queued_interactive+q.queued_batch+q.waiting_engine;
 const kv=s.kv;$('kvuse').textContent=kv.blocks_used+' / '+kv.blocks_total;
 $('hit').textContent=(100*s.prefix_cache.hit_rate).toFixed(1)+' %';
 const h=s.history,last=h.length?h[h.length-1]:null;$('toks').textContent=last?last.output_tokens_per_s.toFixed(1):'0';
 $('ttft').textContent=ms(s.counters.ttft_mean_s);$('itl').textContent=ms(s.counters.itl_mean_s);
 let rej=0;for(const k in s.counters.requests_rejected)rej+=s.counters.requests_rejected[k];
 $('rej').textContent=s.counters.requests_accepted+' / '+rej+' / '+s.engine.preemptions;
 const mp=s.memory_pressure;if(mp){$('press').textContent=mp.level+' ('+kv.blocks_limit+' / '+kv.blocks_total+', '+(mp.reclaimed_bytes/1048576).toFixed(1)+' MiB)';$('press').style.color=mp.level==='critical'?'#ff7b72':mp.level==='elevated'?'#d29922':'';$('press').title=mp.reasons||'';}
 const k=drawMap(kv.map);
 $('kvinfo').textContent='('+kv.blocks_total+' blocks of '+kv.block_size+' tokens, '+kv.blocks_cached+' cached, '+kv.blocks_shared+' shared, '+kv.blocks_reserved+' reserved'+(k>1?'; '+k+' blocks per cell':'')+')';
 const iv=s.history_interval_s||2;
 chart('lat',[{c:'#58a6ff',v:h.map(p=>p.ttft_mean_s)},{c:'#d29922',v:h.map(p=>p.itl_mean_s)}],ms,null,iv);
 chart('load',[{c:'#3fb950',v:h.map(p=>p.output_tokens_per_s)},{c:'#58a6ff',r:1,v:h.map(p=>p.running)},{c:'#ff7b72',r:1,v:h.map(p=>p.waiting)}],v=>v.toFixed(0),v=>String(+v.toFixed(1)),iv);
 if(s.tenants){$('tenants').style.display='';const pc=s.prefix_cache,esc=t=>String(t).replace(/[&<>"]/g,c=>'&#'+c.charCodeAt(0)+';');
  let t='<tr style="color:#9aa5b1;text-align:right"><th style="text-align:left">tenant</th><th>version</th><th>requests</th><th>rejected</th><th>prompt tokens</th><th>cached</th><th>hit rate</th><th>completion tokens</th></tr>';
  for(const x of s.tenants)t+='<tr style="text-align:right"><td style="text-align:left">'+esc(x.id)+'</td><td>'+x.permission_version+'</td><td>'+x.requests+'</td><td>'+x.rejected+'</td><td>'+x.prompt_tokens+'</td><td>'+x.cached_tokens+'</td><td>'+(100*x.prefix_hit_rate).toFixed(1)+' %</td><td>'+x.completion_tokens+'</td></tr>';
  t+='<tr style="color:#9aa5b1;text-align:right"><td colspan="8">public-prefix hit tokens '+pc.public_hit_tokens+' · quota evictions '+pc.quota_evictions+' · TTL expiries '+pc.expired+'</td></tr>';
  $('ttab').innerHTML=t;}
 document.body.dataset.ready='1';
}catch(e){$('err').textContent='stats unavailable: '+e;}
 setTimeout(tick,1000);}
tick();
</script></body></html>
)HTML";
  return page;
}

}  // namespace hinge::server
