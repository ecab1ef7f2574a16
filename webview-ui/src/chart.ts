// A small speed chart drawn as plain SVG (no chart library: ~80 lines against 40+ KB for the smallest one, and the
// colours come straight from the theme's chart variables through CSS classes). The figures it plots are also in
// the panel as text; the SVG carries a one-sentence summary as its accessible name.
const SVG = 'http://www.w3.org/2000/svg';

export interface ChartOptions {
  /** Accessible name (what the chart shows, with its peak and average). */
  label: string;
  /** Text under the right end of the x axis, e.g. "12 s". */
  xEnd: string;
  /** Text under the left end, e.g. "0" or "−5 min". */
  xStart: string;
  /** Formats the y-axis maximum, e.g. "42 tok/s". */
  yFormat: (v: number) => string;
}

function svg<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string | number>): SVGElementTagNameMap[K] {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  return node;
}

/**
 * A bar chart of `values` (equal-width bars, left to right) in a figure with its y maximum and x ends labelled.
 * Width follows the container (viewBox with preserveAspectRatio none); the height is fixed by CSS.
 */
export function barChart(values: readonly number[], o: ChartOptions): HTMLElement {
  const fig = document.createElement('figure');
  fig.className = 'chart';
  const W = 300;
  const H = 60;
  const max = Math.max(0, ...values);
  const top = max > 0 ? niceCeil(max) : 1;
  const root = svg('svg', { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: 'none', role: 'img', 'aria-label': o.label, class: 'chart-svg' });
  root.append(svg('line', { x1: 0, y1: 0.5, x2: W, y2: 0.5, class: 'chart-grid' }));
  root.append(svg('line', { x1: 0, y1: H / 2, x2: W, y2: H / 2, class: 'chart-grid' }));
  root.append(svg('line', { x1: 0, y1: H - 0.5, x2: W, y2: H - 0.5, class: 'chart-axis' }));
  const n = Math.max(values.length, 1);
  const bw = W / n;
  const gap = n > 30 ? 0.5 : 1;
  values.forEach((v, i) => {
    const h = top > 0 ? (Math.max(0, v) / top) * (H - 1) : 0;
    if (h <= 0) return;
    root.append(svg('rect', { x: i * bw + gap / 2, y: H - 1 - h, width: Math.max(0.5, bw - gap), height: h, class: 'chart-bar' }));
  });
  const yLabel = document.createElement('span');
  yLabel.className = 'chart-y';
  yLabel.textContent = o.yFormat(top);
  const xAxis = document.createElement('div');
  xAxis.className = 'chart-x';
  const a = document.createElement('span');
  a.textContent = o.xStart;
  const b = document.createElement('span');
  b.textContent = o.xEnd;
  xAxis.append(a, b);
  const plot = document.createElement('div');
  plot.className = 'chart-plot';
  plot.append(root, yLabel);
  fig.append(plot, xAxis);
  return fig;
}

/** 1, 2, 5 × 10^k at or above v, so the y label is a round number. */
export function niceCeil(v: number): number {
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}
