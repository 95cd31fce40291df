/* Petrel console: a small SVG line chart for rate series (no third-party code).
 * PetrelChart.svg(opts) returns SVG markup; every number is formatted by us and
 * every label passes through esc(), so server data never reaches the markup raw. */
'use strict';

window.PetrelChart = (function () {
  const PAD_L = 44;        /* room for y labels */
  const PAD_R = 8;
  const PAD_T = 10;
  const PAD_B = 22;        /* room for x labels */

  function esc(s) {
    return String(s).replace(/[&<>"']/g, c => ({
      '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
  }

  /* The smallest of 1, 2, 5 x 10^n that is >= v (at least 1). */
  function niceMax(v) {
    if (!(v > 1)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
    return 10 * p;
  }

  function fmt(v) {
    if (v >= 1e6) return (v / 1e6).toFixed(v >= 1e7 ? 0 : 1) + 'M';
    if (v >= 1e3) return (v / 1e3).toFixed(v >= 1e4 ? 0 : 1) + 'k';
    return String(Math.round(v * 10) / 10);
  }

  /* opts: {now, windowMs, width, height, series:[{name, cls, points:[[t, v], ...]}], label}
   * width/height are in CSS pixels (the box the chart fills), so text keeps
   * its size at any width. Points outside [now - windowMs, now] are skipped. */
  function svg(opts) {
    const W = Math.max(200, Math.round(opts.width || 480));
    const H = Math.max(120, Math.round(opts.height || 180));
    const t0 = opts.now - opts.windowMs;
    let max = 0;
    for (const s of opts.series)
      for (const p of s.points) if (p[0] >= t0 && p[1] > max) max = p[1];
    const ymax = niceMax(max);
    const pw = W - PAD_L - PAD_R;
    const ph = H - PAD_T - PAD_B;
    const x = t => PAD_L + (t - t0) / opts.windowMs * pw;
    const y = v => PAD_T + ph - v / ymax * ph;
    const out = [];
    out.push('<svg class="chart" viewBox="0 0 ' + W + ' ' + H + '" role="img" aria-label="' +
             esc(opts.label) + '" width="' + W + '" height="' + H + '">');
    for (const f of [0, 0.5, 1]) {
      const yy = y(ymax * f).toFixed(1);
      out.push('<line class="grid" x1="' + PAD_L + '" x2="' + (W - PAD_R) + '" y1="' + yy +
               '" y2="' + yy + '"/>');
      out.push('<text class="ylab" x="' + (PAD_L - 6) + '" y="' + yy + '" dy="4">' +
               esc(fmt(ymax * f)) + '</text>');
    }
    const minutes = Math.round(opts.windowMs / 60000);
    for (let m = 0; m <= minutes; m++) {
      const xx = x(t0 + m * 60000).toFixed(1);
      const lab = m === minutes ? 'now' : '-' + (minutes - m) + 'm';
      const anchor = m === 0 ? 'start' : m === minutes ? 'end' : 'middle';
      out.push('<text class="xlab" text-anchor="' + anchor + '" x="' + xx + '" y="' + (H - 6) + '">' +
               esc(lab) + '</text>');
    }
    for (const s of opts.series) {
      const pts = [];
      for (const p of s.points)
        if (p[0] >= t0) pts.push(x(p[0]).toFixed(1) + ',' + y(p[1]).toFixed(1));
      if (pts.length === 1) pts.push(pts[0]);
      if (pts.length)
        out.push('<polyline class="line ' + esc(s.cls) + '" points="' + pts.join(' ') + '"/>');
    }
    out.push('</svg>');
    return out.join('');
  }

  return { svg, niceMax, fmt };
}());
