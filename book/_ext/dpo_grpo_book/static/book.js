/* The book's behaviour on every page (dpo_grpo_book): the sidebar toggle on wide
   screens, the language switch that keeps the reader's place, and the plotly figures,
   drawn once the text is on screen and laid out for the width they get.
   tests/browser/test_reader_walk.py checks each of these in Chromium. */
(function () {
  "use strict";

  // ------------------------------------------------------------------------------
  // 1. The primary sidebar. Below 960 px pydata-sphinx-theme opens it as a dialog
  //    (its own handler); from 960 px it sits beside the article and this handler
  //    collapses or restores it, remembering the choice across pages.
  // ------------------------------------------------------------------------------
  var WIDE = "(min-width: 960px)";
  var COLLAPSED = "book-nav-collapsed";

  function remembered(key) {
    try {
      return window.localStorage.getItem(key);
    } catch (e) {
      return null;
    }
  }
  function remember(key, value) {
    try {
      window.localStorage.setItem(key, value);
    } catch (e) {
      /* private mode: the choice lasts for this page only */
    }
  }

  if (remembered(COLLAPSED) === "1") {
    document.documentElement.classList.add(COLLAPSED);
  }

  document.addEventListener(
    "click",
    function (event) {
      var toggle = event.target.closest && event.target.closest(".primary-toggle");
      if (!toggle || !window.matchMedia(WIDE).matches) {
        return;
      }
      event.preventDefault();
      event.stopPropagation();
      var collapsed = document.documentElement.classList.toggle(COLLAPSED);
      toggle.setAttribute("aria-expanded", String(!collapsed));
      remember(COLLAPSED, collapsed ? "1" : "0");
    },
    true
  );

  // ------------------------------------------------------------------------------
  // 2. The language switch opens the same page of the other edition in this tab, at
  //    the section the reader is reading. The two editions have the same sections in
  //    the same order (the Chinese pages are translations of the English ones), so a
  //    section travels as its position: #book-section-N.
  // ------------------------------------------------------------------------------
  var SECTION_HASH = /^#book-section-(\d+)$/;

  function sections() {
    return Array.prototype.slice.call(
      document.querySelectorAll("article.bd-article section[id]")
    );
  }

  function currentSection() {
    var all = sections();
    var current = -1;
    for (var i = 0; i < all.length; i++) {
      if (all[i].getBoundingClientRect().top <= 90) {
        current = i;
      }
    }
    return current;
  }

  function prepareLanguageSwitch() {
    document.querySelectorAll("a.btn-language-switch").forEach(function (link) {
      link.removeAttribute("target");
    });
  }

  document.addEventListener(
    "click",
    function (event) {
      var link = event.target.closest && event.target.closest("a.btn-language-switch");
      if (!link) {
        return;
      }
      event.preventDefault();
      var index = currentSection();
      var target = link.href.split("#")[0];
      window.location.href = index > 0 ? target + "#book-section-" + index : target;
    },
    true
  );

  function arriveAtSection() {
    var m = SECTION_HASH.exec(window.location.hash);
    if (!m) {
      return;
    }
    var section = sections()[Number(m[1])];
    if (!section) {
      return;
    }
    history.replaceState(null, "", "#" + section.id);
    section.scrollIntoView();
  }

  // ------------------------------------------------------------------------------
  // 3. Plotly figures. The renderer writes each figure as JSON beside an empty div;
  //    plotly.js loads after the text is drawn and a figure is drawn when it comes
  //    near the screen. Below 600 px a figure is laid out for a phone: legend
  //    and sliders below the plot, each slider the full width, narrower margins.
  // ------------------------------------------------------------------------------
  var PHONE = 600;
  var SLIDER_HEIGHT = 78;
  var scriptUrl = document.currentScript && document.currentScript.src;
  var plotlyLoading = null;

  function loadPlotly() {
    if (window.Plotly) {
      return Promise.resolve(window.Plotly);
    }
    if (!plotlyLoading) {
      plotlyLoading = new Promise(function (resolve, reject) {
        var script = document.createElement("script");
        script.src = new URL("vendor/plotly/plotly.min.js", scriptUrl).href;
        script.onload = function () {
          resolve(window.Plotly);
        };
        script.onerror = reject;
        document.head.appendChild(script);
      });
    }
    return plotlyLoading;
  }

  // The cartesian subplots of a layout, top row first, left to right:
  // [{x: "xaxis2", y: "yaxis2", xd: [x0, x1], yd: [y0, y1]}, ...].
  function subplots(layout) {
    var found = [];
    Object.keys(layout).forEach(function (key) {
      if (!/^xaxis\d*$/.test(key)) {
        return;
      }
      var xa = layout[key] || {};
      var yKey = "yaxis" + String(xa.anchor || "y").slice(1);
      var ya = layout[yKey] || {};
      if (ya.overlaying) {
        return;
      }
      found.push({ x: key, y: yKey, xd: xa.domain || [0, 1], yd: ya.domain || [0, 1] });
    });
    found.sort(function (a, b) {
      return b.yd[1] - a.yd[1] || a.xd[0] - b.xd[0];
    });
    return found;
  }

  function within(value, range, slack) {
    return value >= range[0] - slack && value <= range[1] + slack;
  }

  // The subplot a paper-positioned label belongs to: the one whose x range holds it
  // and whose y range holds it or lies just below it (a subplot title sits on top).
  function ownerOf(x, y, plots) {
    var best = null;
    plots.forEach(function (p) {
      if (within(x, p.xd, 0.01) && y >= p.yd[0] - 0.01 && y <= p.yd[1] + 0.15) {
        if (!best || Math.abs(y - p.yd[1]) < Math.abs(y - best.yd[1])) {
          best = p;
        }
      }
    });
    return best;
  }

  // A grid of subplots becomes one column, each subplot the full width, its title
  // and colour bar moved with it; labels outside every subplot keep their distance in
  // pixels from the top or bottom of the plotting area.
  function oneColumn(out, plotHeight) {
    var plots = subplots(out);
    var columns = plots.filter(function (p) {
      return p.xd[0] > 0.01 || p.xd[1] < 0.99;
    });
    if (plots.length < 2 || !columns.length) {
      return plotHeight;
    }
    var GAP = 95; // x tick labels, x title, the next subplot's title
    var heights = plots.map(function (p) {
      return Math.max(210, Math.min(320, (p.yd[1] - p.yd[0]) * plotHeight));
    });
    var total = heights.reduce(function (a, b) {
      return a + b;
    }, 0) + GAP * (plots.length - 1);
    var top = 0;
    plots.forEach(function (p, k) {
      p.nxd = [0, 1];
      p.nyd = [1 - (top + heights[k]) / total, 1 - top / total];
      top += heights[k] + GAP;
    });
    function moveY(y, from, to) {
      return to[0] + ((y - from[0]) * (to[1] - to[0])) / (from[1] - from[0]);
    }
    function moveX(x, from, to) {
      return to[0] + ((x - from[0]) * (to[1] - to[0])) / (from[1] - from[0] || 1);
    }
    (out.annotations || []).forEach(function (a) {
      if (a.xref !== "paper" || a.yref !== "paper") {
        return;
      }
      var p = ownerOf(a.x, a.y, plots);
      if (p) {
        a.x = moveX(a.x, p.xd, p.nxd);
        a.y = moveY(a.y, p.yd, p.nyd);
      } else if (a.y < 0.5) {
        a.y = (a.y * plotHeight) / total; // pixels below the plotting area
      } else {
        a.y = 1 + ((a.y - 1) * plotHeight) / total;
      }
    });
    plots.forEach(function (p) {
      out[p.x] = Object.assign({}, out[p.x], { domain: p.nxd });
      out[p.y] = Object.assign({}, out[p.y], { domain: p.nyd });
    });
    out._bookPlots = plots;
    return total;
  }

  // Colour bars beside the subplot of their trace, in a right margin made for them.
  function placeColorbars(data, out) {
    var plots = out._bookPlots || [];
    var placed = false;
    data.forEach(function (trace) {
      if (!trace.colorbar && !(trace.marker && trace.marker.colorbar)) {
        return;
      }
      var bar = trace.colorbar || trace.marker.colorbar;
      var xKey = "xaxis" + String(trace.xaxis || "x").slice(1);
      var p = plots.filter(function (q) {
        return q.x === xKey;
      })[0];
      if (p) {
        bar.x = 1.02;
        bar.xanchor = "left";
        bar.y = (p.nyd[0] + p.nyd[1]) / 2;
        bar.yanchor = "middle";
        bar.len = p.nyd[1] - p.nyd[0];
        bar.thickness = 10;
        placed = true;
      }
    });
    if (placed) {
      out.margin.r = Math.max(out.margin.r, 58);
    }
  }

  // Rows a horizontal legend takes at this width (entries flow and wrap).
  function legendRows(data, width) {
    var rows = 1;
    var used = 0;
    var seen = {};
    data.forEach(function (trace) {
      var key = trace.legendgroup || trace.name;
      if (trace.showlegend === false || !trace.name || seen[key]) {
        return;
      }
      seen[key] = true;
      var w = 44 + 6.2 * String(trace.name).replace(/<[^>]*>/g, "").length;
      if (used && used + w > width - 10) {
        rows += 1;
        used = 0;
      }
      used += w;
    });
    return used || rows > 1 ? rows : 0;
  }

  function narrowLayout(data, layout, width) {
    var out = JSON.parse(JSON.stringify(layout));
    var margin = out.margin || {};
    out.margin = {
      l: Math.min(margin.l === undefined ? 60 : margin.l, Math.round(0.45 * width)),
      r: Math.min(margin.r === undefined ? 20 : margin.r, 12),
      t: margin.t === undefined ? 60 : margin.t,
      b: margin.b === undefined ? 60 : margin.b,
    };
    var height = out.height || 450;
    var plotHeight = height - (margin.t === undefined ? 60 : margin.t) - (margin.b === undefined ? 60 : margin.b);
    height += oneColumn(out, plotHeight) - plotHeight;
    placeColorbars(data, out);
    delete out._bookPlots;
    var sliders = out.sliders || [];
    // a slider's x and len are fractions of the plotting area: reach into the margins
    var plotWidth = Math.max(width - out.margin.l - out.margin.r, 1);
    if (sliders.length) {
      // side by side sliders become a column, each the full width of the figure
      sliders.forEach(function (slider, k) {
        slider.x = -out.margin.l / plotWidth;
        slider.len = width / plotWidth;
        slider.xanchor = "left";
        slider.yanchor = "top";
        slider.y = 0;
        // room at both ends for the first and last step labels
        slider.pad = {
          t: ((slider.pad && slider.pad.t) || 50) + k * SLIDER_HEIGHT,
          b: 0,
          l: 24,
          r: 24,
        };
      });
      out.margin.b += (sliders.length - 1) * SLIDER_HEIGHT;
      height += (sliders.length - 1) * SLIDER_HEIGHT;
    }
    var rows = out.showlegend === false ? 0 : legendRows(data, width);
    if (rows) {
      out.legend = Object.assign({}, out.legend, {
        orientation: "h",
        x: 0,
        xref: "container",
        xanchor: "left",
        y: 0,
        yref: "container",
        yanchor: "bottom",
      });
      out.margin.b += 20 * rows + 8;
      height += 20 * rows + 8;
    }
    out.height = height;
    out.width = width;
    out.autosize = false;
    return out;
  }

  function drawFigure(holder) {
    if (holder.dataset.drawn) {
      return Promise.resolve();
    }
    holder.dataset.drawn = "1";
    var spec = JSON.parse(holder.querySelector("script.book-plotly-json").textContent);
    var div = holder.querySelector(".plotly-graph-div");
    return loadPlotly().then(function (Plotly) {
      var layout = spec.layout || {};
      var width = holder.clientWidth;
      if (width < PHONE) {
        layout = narrowLayout(spec.data, layout, width);
        holder.classList.add("book-plotly-narrow");
      }
      div.style.height = (layout.height || 450) + "px";
      return Plotly.newPlot(div, spec.data, layout, spec.config || {});
    });
  }

  function drawFiguresNearTheScreen() {
    var holders = document.querySelectorAll(".book-plotly");
    if (!holders.length) {
      return;
    }
    if (!("IntersectionObserver" in window)) {
      holders.forEach(drawFigure);
      return;
    }
    var observer = new IntersectionObserver(
      function (entries) {
        entries.forEach(function (entry) {
          if (entry.isIntersecting) {
            observer.unobserve(entry.target);
            drawFigure(entry.target);
          }
        });
      },
      { rootMargin: "800px 0px" }
    );
    holders.forEach(function (holder) {
      observer.observe(holder);
    });
  }

  /** Every figure of the page drawn (a test's and a printing reader's shortcut). */
  window.bookDrawAllFigures = function () {
    return Promise.all(
      Array.prototype.map.call(document.querySelectorAll(".book-plotly"), drawFigure)
    );
  };

  function ready() {
    prepareLanguageSwitch();
    arriveAtSection();
    // after the first paint: the text first, then the figures
    window.requestAnimationFrame(function () {
      window.setTimeout(drawFiguresNearTheScreen, 0);
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", ready);
  } else {
    ready();
  }
  window.addEventListener("beforeprint", function () {
    window.bookDrawAllFigures();
  });
})();
