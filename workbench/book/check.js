// What a learner would trip over on a page of the built book, measured in the browser after MathJax and plotly have
// drawn. workbench/book/check.py evaluates this function expression in each page and calls it; it returns the
// defects, each {check, where, detail}; the checks are listed in check.py's CHECKS.
(function () {
  const OVERLAP_PX = 2;       // two text boxes overlap when they share more than this in both directions
  const EDGE_PX = 1;          // a text box runs past its figure's edge by more than this
  const TOUCH_PX = 4;         // titles closer than this read as one
  const TEX = /\\(?:[A-Za-z]{2,}|[_{}])/;  // \pi, \text, \_ , \{ : TeX that MathJax did not typeset
  const TEX_IN_CODE = /\\_|\\(?:pi|beta|alpha|epsilon|frac|text|texttt|mathrm|mathtt|sum|log|left|right|hat|cdot)\b/;
  const ERROR = /\bTraceback \(most recent call last\)|\b[A-Z]\w*(?:Error|Exception)\b: |\bError: /;
  const VERDICT = /^(reproduced|contradicted|no difference beyond seed noise|not testable here.{20,})/s;

  const defects = [];
  const add = (check, where, detail) => defects.push({check, where, detail});
  const text = (el) => (el.textContent || "").replace(/\s+/g, " ").trim();
  const short = (s, n = 70) => (s.length > n ? s.slice(0, n - 1) + "…" : s);
  const visible = (el) => {
    const r = el.getBoundingClientRect();
    return r.width > 0 && r.height > 0 && getComputedStyle(el).visibility !== "hidden";
  };
  const figures = [...document.querySelectorAll(".plotly-graph-div")];
  const figureName = (gd) => {
    const title = gd.querySelector(".gtitle");
    return `figure ${figures.indexOf(gd) + 1}` + (title ? ` ("${short(text(title), 50)}")` : "");
  };

  // ---------------------------------------------------------------------------------------------- figures
  const HAS_DATA = ["x", "y", "z", "values", "r", "lat", "lon", "a", "b", "open"];
  function traceHasData(trace) {
    if (trace.type === "table") return ((trace.cells || {}).values || []).length > 0;
    return HAS_DATA.some((k) => trace[k] != null && typeof trace[k] !== "string" && trace[k].length > 0);
  }

  // The text boxes of a figure that must not collide: title, axis titles, each axis's tick labels (one box of
  // several parts), annotations (subplot titles among them), legend, colour bars. `kind` says which rules apply.
  function textBoxes(gd) {
    const boxes = [];
    const push = (el, name, kind) => {
      if (!el || !visible(el)) return;
      const r = el.getBoundingClientRect();
      boxes.push({name, kind, left: r.left, right: r.right, top: r.top, bottom: r.bottom});
    };
    gd.querySelectorAll(".gtitle").forEach((el) => push(el, `title "${short(text(el), 40)}"`, "title"));
    gd.querySelectorAll("text[class$='title']:not(.gtitle):not(.legendtitletext)").forEach((el) => {
      if (!el.closest(".colorbar") && text(el)) push(el, `${el.getAttribute("class")} "${short(text(el), 40)}"`, "axis title");
    });
    gd.querySelectorAll(".annotation").forEach((el) => {
      if (text(el)) push(el.querySelector(".annotation-text-g") || el, `annotation "${short(text(el), 40)}"`, "annotation");
    });
    gd.querySelectorAll(".legend").forEach((el) => push(el.querySelector(".bg") || el, "legend", "legend"));
    gd.querySelectorAll(".colorbar").forEach((el, i) => push(el, `colour bar ${i + 1}`, "colour bar"));
    gd.querySelectorAll(".xaxislayer-above, .yaxislayer-above").forEach((layer) => {
      const labels = [...layer.querySelectorAll("text")].filter((el) => text(el) && visible(el));
      const rects = labels.map((el) => el.getBoundingClientRect());
      if (!rects.length) return;
      const rotated = labels.some((el) => /rotate\((?!0[,)])/.test(el.getAttribute("transform") || ""));
      const axis = (layer.querySelector("[class$='tick']") || layer).getAttribute("class").split(" ")[0];
      boxes.push({name: `${axis} labels`, kind: "ticks", letter: axis[0], parts: rects, rotated,
                  left: Math.min(...rects.map((r) => r.left)), right: Math.max(...rects.map((r) => r.right)),
                  top: Math.min(...rects.map((r) => r.top)), bottom: Math.max(...rects.map((r) => r.bottom))});
    });
    return boxes;
  }

  // The plot areas of a figure's cartesian subplots: an axis title, tick labels or a colour bar must stay out of
  // every one of them (a y-title drawn through the neighbouring panel's bars).
  const plotAreas = (gd) => [...gd.querySelectorAll(".draglayer .nsewdrag")].map((el) => {
    const r = el.getBoundingClientRect();
    return {name: `the plot area of ${el.parentNode.getAttribute("class").split(" ")[0]}`, left: r.left,
            right: r.right, top: r.top, bottom: r.bottom};
  });

  // boxes share more than OVERLAP_PX in both directions; with `touch`, or are closer than `touch` px
  const overlap = (a, b, touch = 0) => {
    const limit = touch ? -touch : OVERLAP_PX;
    return Math.min(a.right, b.right) - Math.max(a.left, b.left) > limit &&
           Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > limit;
  };
  // a tick-label box is the union of its labels: it collides when one of its labels does; two titles closer than
  // TOUCH_PX run together into one line ("scissorsy2")
  const collide = (a, b, touch = 0) => (a.parts || [a]).some((p) => (b.parts || [b]).some((q) => overlap(p, q, touch)));
  const WORDS = ["title", "axis title", "annotation"];

  function figureDefects(gd) {
    const where = figureName(gd);
    const edge = gd.getBoundingClientRect();
    const boxes = textBoxes(gd);
    for (const b of boxes) {
      const past = Math.max(edge.left - b.left, b.right - edge.right, edge.top - b.top, b.bottom - edge.bottom);
      if (past > EDGE_PX) add("text-past-edge", where, `${b.name} runs ${Math.round(past)} px past the figure's edge`);
      if (b.kind === "ticks" && !b.rotated) {  // the labels of one axis over each other (a slanted label's box is
        // far larger than its glyphs, and plotly slants labels exactly so that they do not touch)
        const crowded = b.parts.some((p, i) => b.parts.slice(i + 1).some((q) => overlap(p, q)));
        if (crowded) add("text-overlap", where, `${b.name} overlap each other`);
      }
    }
    for (let i = 0; i < boxes.length; i++) {
      for (let j = i + 1; j < boxes.length; j++) {
        const [a, b] = [boxes[i], boxes[j]];
        if (a.kind === "ticks" && b.kind === "ticks" && a.letter !== b.letter) continue;  // x and y meet at a corner
        const touch = WORDS.includes(a.kind) && WORDS.includes(b.kind) ? TOUCH_PX : 0;
        if (collide(a, b, touch)) add("text-overlap", where, `${a.name} overlaps ${b.name}`);
      }
    }
    const areas = plotAreas(gd);
    for (const b of boxes.filter((b) => ["axis title", "ticks", "colour bar"].includes(b.kind))) {
      for (const area of areas) {
        if (collide(b, area)) add("text-overlap", where, `${b.name} is drawn over ${area.name}`);
      }
    }
  }

  for (const gd of figures) {
    if (!gd.data || !gd._fullLayout) {
      add("figure-not-drawn", figureName(gd), "plotly did not draw this figure");
      continue;
    }
    const traces = gd._fullData || gd.data;  // _fullData: arrays decoded from plotly's binary form
    if (!traces.some(traceHasData)) add("empty-figure", figureName(gd), `${traces.length} trace(s), none with data`);
    figureDefects(gd);
  }

  // ------------------------------------------------------------------------------- tables and display math
  const article = document.querySelector("article") || document.querySelector("main") || document.body;
  const column = article.getBoundingClientRect();
  const styleOf = (el) => getComputedStyle(el);
  const columnWidth = column.width - parseFloat(styleOf(article).paddingLeft) - parseFloat(styleOf(article).paddingRight);
  const wide = [...article.querySelectorAll("table, mjx-container[display='true']")]
    .filter((el) => !el.closest(".js-plotly-plot") && visible(el) && !el.parentElement.closest("table"));
  for (const el of wide) {
    const width = Math.max(el.scrollWidth, el.getBoundingClientRect().width);
    const what = el.tagName === "TABLE"
      ? `a table (${short(text(el.querySelector("tr") || el), 60)})`
      : `an equation (${short(text(el.querySelector("mjx-assistive-mml") || el), 60)})`;
    let box = el;  // the element itself or the first ancestor that scrolls or clips it
    while (box && box !== article && !/auto|scroll|hidden|clip/.test(styleOf(box).overflowX)) box = box.parentElement;
    if (!box || box === article) {
      if (width > columnWidth + 1) {
        add("too-wide", what, `${Math.round(width)} px wide in a ${Math.round(columnWidth)} px column, spilling out of it`);
      }
      continue;
    }
    if (box.scrollWidth <= box.clientWidth + 1) continue;  // it fits the box that holds it
    const size = `${Math.round(box.scrollWidth)} px wide in a ${Math.round(box.clientWidth)} px box`;
    const height = box.getBoundingClientRect().height;
    if (!/auto|scroll/.test(styleOf(box).overflowX)) {
      add("too-wide", what, `${size}, cut with no way to scroll`);
    } else if (height > window.innerHeight) {
      add("too-wide", what, `${size}; its scrollbar is at the bottom of a ${Math.round(height)} px block, out of sight`);
    } else if (box.offsetHeight - box.clientHeight <= 0) {  // an overlay scrollbar, shown only while scrolling
      add("too-wide", what, `${size}; it scrolls, but no scrollbar is drawn to say so`);
    }
  }

  // text cut at the edge of a box that hides what overflows it (a card cutting a long test name)
  const clippers = [...article.querySelectorAll("*")].filter((el) => /hidden|clip/.test(styleOf(el).overflowX) &&
    !el.closest(".plotly-graph-div, mjx-container") && el.scrollWidth > el.clientWidth + 1 &&
    !el.querySelector(":scope > table, :scope > mjx-container"));  // those two are measured above
  for (const box of clippers) {
    const edge = box.getBoundingClientRect().right - parseFloat(styleOf(box).paddingRight) + 1;
    const cut = [...box.querySelectorAll("code, a, p, li, td, th, summary, span")].find((el) =>
      visible(el) && !el.closest("mjx-container, .plotly-graph-div") && el.getBoundingClientRect().right > edge + 1);
    if (cut) add("too-wide", `"${short(text(cut), 60)}"`, `cut at the edge of its box (${box.className || box.tagName})`);
  }

  // --------------------------------------------------------------------------------------------- raw TeX
  function* textNodes(root, skip) {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT, {
      acceptNode: (node) => (node.parentElement && !node.parentElement.closest(skip) ? NodeFilter.FILTER_ACCEPT
                                                                                     : NodeFilter.FILTER_REJECT),
    });
    while (walker.nextNode()) yield walker.currentNode;
  }
  const NOT_READ = "script, style, noscript, textarea, mjx-assistive-mml, .cell_input, .headerlink, [hidden]";
  for (const node of textNodes(article, NOT_READ)) {
    // in code, only what cannot be a Python escape ("\nI" in a repr is not TeX)
    const match = node.textContent.match(node.parentElement.closest("code, pre") ? TEX_IN_CODE : TEX);
    if (match && visible(node.parentElement)) {
      const at = node.textContent.indexOf(match[0]);
      add("raw-tex", short(text(node.parentElement.closest("p, li, td, th, h1, h2, h3, h4, mjx-container, div") || node.parentElement), 60),
          `shows "${short(node.textContent.slice(Math.max(0, at - 20), at + 30), 60)}"`);
    }
  }

  // typeset math that shows a backslash (MathJax draws "\_" inside \text{} as it is) or MathJax's own error
  for (const math of article.querySelectorAll("mjx-container")) {
    const tex = text(math.querySelector("mjx-assistive-mml") || math);
    if (math.querySelector("mjx-merror")) add("raw-tex", `math "${short(tex, 50)}"`, "MathJax could not typeset it");
    else if (math.querySelector("mjx-c.mjx-c5C")) add("raw-tex", `math "${short(tex, 50)}"`, "shows a backslash");
  }

  // ------------------------------------------------------------------------------------ errors in outputs
  for (const output of article.querySelectorAll(".cell_output")) {
    const cell = output.closest(".cell");
    if (cell && cell.classList.contains("tag_expected-error")) continue;  // a notebook shows this error on purpose
    for (const node of textNodes(output, "script, style")) {
      const match = node.textContent.match(ERROR);
      if (match) {
        const at = node.textContent.indexOf(match[0]);
        add("error-output", `cell ${[...article.querySelectorAll(".cell")].indexOf(cell) + 1}`,
            `shows "${short(node.textContent.slice(at, at + 90), 90)}"`);
        break;
      }
    }
  }

  // ------------------------------------------------------------------------------------------ claims rows
  for (const table of article.querySelectorAll("table")) {
    const heads = [...table.querySelectorAll("thead th, tr:first-child th")].map((th) => text(th).toLowerCase());
    const col = heads.indexOf("verdict");
    if (col < 0) continue;
    for (const row of table.querySelectorAll("tbody tr")) {
      const cell = row.children[col];
      const said = cell ? text(cell) : "";  // the badge and, folded under it, the reason
      if (!VERDICT.test(said)) {
        const recipe = text(row.querySelector("code") || row.children[0] || row);
        add("claim-without-verdict", `claims row ${short(recipe, 30)}`, `verdict "${short(said, 60)}"`);
      }
    }
  }
  return defects;
})
