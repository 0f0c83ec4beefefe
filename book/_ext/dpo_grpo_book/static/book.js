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
  var COLORBAR_HEIGHT = 70; // a horizontal colour bar with its title and tick labels
  var COLORBAR_OFFSET = 30; // its top, below the subplot's tick labels
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

  // A grid of subplots becomes one column, each subplot the full width, its title,
  // colour bar and own slider moved with it; a subplot with no trace is dropped;
  // labels, menus and sliders outside every subplot keep their distance in pixels from
  // the top or bottom of the plotting area.
  function oneColumn(out, data, plotHeight) {
    var used = {};
    var bars = {};
    data.forEach(function (trace) {
      var key = "xaxis" + String(trace.xaxis || "x").slice(1);
      used[key] = true;
      if (colorbarOf(trace)) {
        bars[key] = (bars[key] || 0) + 1;
      }
    });
    var all = subplots(out);
    var plots = all.filter(function (p) {
      return used[p.x];
    });
    var columns = plots.filter(function (p) {
      return p.xd[0] > 0.01 || p.xd[1] < 0.99;
    });
    if (plots.length < 2 || !columns.length) {
      return plotHeight;
    }
    all.forEach(function (p) {
      if (!used[p.x]) {
        out[p.x] = Object.assign({}, out[p.x], { visible: false });
        out[p.y] = Object.assign({}, out[p.y], { visible: false });
      }
    });
    // a slider that sits under one subplot (not at the bottom of the figure) stays
    // under it
    (out.sliders || []).forEach(function (slider) {
      var x = (slider.x || 0) + 0.01;
      var y = slider.y || 0;
      plots.forEach(function (p) {
        if (y > 0.02 && within(x, p.xd, 0) && Math.abs(y - p.yd[0]) < 0.03) {
          slider._bookPlot = p;
          p.sliders = (p.sliders || 0) + 1;
        }
      });
    });
    var GAP = 95; // x tick labels, x title, the next subplot's title
    var heights = plots.map(function (p) {
      return Math.max(210, Math.min(320, (p.yd[1] - p.yd[0]) * plotHeight));
    });
    // below each subplot: its sliders and its colour bars
    var under = plots.map(function (p) {
      return (p.sliders || 0) * SLIDER_HEIGHT + (bars[p.x] || 0) * COLORBAR_HEIGHT;
    });
    var total = 0;
    plots.forEach(function (p, k) {
      total += heights[k] + (k ? GAP : 0) + (k < plots.length - 1 ? under[k] : 0);
    });
    var top = 0;
    plots.forEach(function (p, k) {
      p.nxd = [0, 1];
      p.nyd = [1 - (top + heights[k]) / total, 1 - top / total];
      top += heights[k] + GAP + under[k];
    });
    // the last subplot's sliders and colour bars go into the bottom margin
    var belowLast = under[plots.length - 1];
    out._bookBelowLast = belowLast;
    out._bookTotal = total;
    function moveY(y, from, to) {
      return to[0] + ((y - from[0]) * (to[1] - to[0])) / (from[1] - from[0]);
    }
    function moveX(x, from, to) {
      return to[0] + ((x - from[0]) * (to[1] - to[0])) / (from[1] - from[0] || 1);
    }
    function keepPixels(y) {
      return y < 0.5
        ? (y * plotHeight - belowLast) / total
        : 1 + ((y - 1) * plotHeight) / total;
    }
    (out.annotations || []).forEach(function (a) {
      if (a.xref !== "paper" || a.yref !== "paper") {
        return;
      }
      var p = ownerOf(a.x, a.y, plots);
      if (p) {
        a.x = moveX(a.x, p.xd, p.nxd);
        a.y = moveY(a.y, p.yd, p.nyd);
      } else {
        a.y = keepPixels(a.y);
      }
    });
    (out.updatemenus || []).concat(out.images || []).forEach(function (item) {
      if ((item.yref || "paper") === "paper" && (item.y < 0 || item.y > 1)) {
        item.y = keepPixels(item.y);
      }
    });
    plots.forEach(function (p) {
      out[p.x] = Object.assign({}, out[p.x], { domain: p.nxd });
      var y = Object.assign({}, out[p.y], { domain: p.nyd });
      if (p.xd[0] > 0.01 && y.showticklabels === false) {
        y.showticklabels = true; // a row's labels, shown at its left, move with each
      }
      out[p.y] = y;
    });
    out._bookPlots = plots;
    return total;
  }

  // Colour bars lie under the subplot of their trace, across its width (the room was
  // made in oneColumn), so that the plotting area keeps the phone's width.
  function placeColorbars(data, out) {
    var plots = out._bookPlots || [];
    var total = out._bookTotal || 1;
    data.forEach(function (trace) {
      var bar = colorbarOf(trace);
      var p = plots.filter(function (q) {
        return q.x === "xaxis" + String(trace.xaxis || "x").slice(1);
      })[0];
      if (!bar || !p) {
        return;
      }
      bar.orientation = "h";
      bar.x = 0.5;
      bar.xanchor = "center";
      bar.y = p.nyd[0] - COLORBAR_OFFSET / total;
      bar.yanchor = "top";
      bar.len = 1;
      bar.thickness = 10;
      bar.title = Object.assign({}, bar.title, { side: "top" });
    });
  }

  function colorbarOf(trace) {
    return trace.colorbar || (trace.marker && trace.marker.colorbar) || null;
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

  // Text wrapped into lines of at most maxWidth pixels (an estimate: a Han character
  // is as wide as the font size, anything else about 0.55 of it), at spaces or between
  // Han characters; plotly breaks lines at <br>.
  var HAN = /[\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef\u3000-\u303f]/;

  function wrapText(text, fontSize, maxWidth) {
    if (typeof text !== "string" || !text || /<br>/i.test(text)) {
      return { text: text, lines: 1 };
    }
    var tokens = text.match(new RegExp(HAN.source + "|\\s+|[^\\s" + HAN.source.slice(1, -1) + "]+", "g")) || [];
    var width = function (t) {
      var plain = t.replace(/<[^>]*>/g, "");
      var w = 0;
      for (var i = 0; i < plain.length; i++) {
        w += HAN.test(plain[i]) ? fontSize : 0.56 * fontSize;
      }
      return w;
    };
    var lines = [""];
    var used = 0;
    tokens.forEach(function (token) {
      var w = width(token);
      if (/^\s+$/.test(token)) {
        if (used) {
          lines[lines.length - 1] += " ";
          used += w;
        }
        return;
      }
      if (used && used + w > maxWidth) {
        lines[lines.length - 1] = lines[lines.length - 1].replace(/\s+$/, "");
        lines.push("");
        used = 0;
      }
      lines[lines.length - 1] += token;
      used += w;
    });
    return { text: lines.join("<br>"), lines: lines.length };
  }

  function titleText(title) {
    return title && typeof title === "object" ? title.text : title;
  }

  // Long titles, subplot titles and axis titles wrapped to the phone's width; the
  // figure's title gets the room its extra lines take.
  function wrapLabels(out, width, height) {
    var base = (out.font && out.font.size) || 12;
    var plotWidth = width - out.margin.l - out.margin.r;
    var extra = 0;
    if (titleText(out.title)) {
      var title = typeof out.title === "object" ? out.title : { text: out.title };
      var size = (title.font && title.font.size) || Math.round(base * 1.4);
      // a title placed on the plotting area starts at its left edge
      var room = title.xref === "paper" ? plotWidth * (1 - (title.x || 0)) : width - 24;
      var wrapped = wrapText(title.text, size, room - 8);
      title.text = wrapped.text;
      out.title = title;
      if (wrapped.lines > 1) {
        // the title hangs from the top; the plot (and its subplot titles, 30 px)
        // starts below its last line
        var lineHeight = Math.round(size * 1.3);
        title.yref = "container";
        title.y = 1;
        title.yanchor = "top";
        title.pad = { t: 8 + size }; // plotly measures from the first baseline
        var top = Math.max(out.margin.t, 8 + size + wrapped.lines * lineHeight + 24);
        extra = top - out.margin.t;
        out.margin.t = top;
      }
    }
    var below = 0;
    (out.annotations || []).forEach(function (a) {
      var size = (a.font && a.font.size) || base;
      var room = plotWidth;
      if (a.xref === "paper") {
        // the room between the anchor and the figure's edges
        var at = out.margin.l + (a.x === undefined ? 0.5 : a.x) * plotWidth;
        var anchor = a.xanchor || "auto";
        if (anchor === "left") {
          room = width - at;
        } else if (anchor === "right") {
          room = at;
        } else {
          room = 2 * Math.min(at, width - at);
        }
        room -= 10;
      }
      var wrapped = wrapText(a.text, size, room);
      a.text = wrapped.text;
      if (a.yref === "paper" && a.y < 0) {
        // a caption under the plot: what its extra lines take moves what is below it
        below = Math.max(below, (wrapped.lines - 1) * Math.round(size * 1.3));
      }
    });
    var plotHeight = height - out.margin.t - out.margin.b;
    Object.keys(out).forEach(function (key) {
      if (!/^[xy]axis\d*$/.test(key) || !titleText(out[key].title)) {
        return;
      }
      var axis = out[key];
      var t = typeof axis.title === "object" ? axis.title : { text: axis.title };
      var size = (t.font && t.font.size) || base + 1;
      // a y title runs along its subplot's height
      var domain = axis.domain || [0, 1];
      var room = key[0] === "x" ? plotWidth : (domain[1] - domain[0]) * plotHeight;
      t.text = wrapText(t.text, size, room).text;
      axis.title = t;
    });
    return { top: extra, below: below };
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
    height += oneColumn(out, data, plotHeight) - plotHeight;
    var labels = wrapLabels(out, width, height);
    height += labels.top;
    placeColorbars(data, out);
    var belowLast = out._bookBelowLast || 0;
    out.margin.b += belowLast;
    height += belowLast;
    delete out._bookPlots;
    delete out._bookTotal;
    delete out._bookBelowLast;
    var sliders = out.sliders || [];
    // a slider's x and len are fractions of the plotting area: reach into the margins
    var plotWidth = Math.max(width - out.margin.l - out.margin.r, 1);
    // side by side sliders become a column, each the full width of the figure: under
    // its own subplot, or stacked below the plot
    var below = 0;
    sliders.forEach(function (slider) {
      var p = slider._bookPlot;
      delete slider._bookPlot;
      var k = p ? 0 : below++;
      slider.x = -out.margin.l / plotWidth;
      slider.len = width / plotWidth;
      slider.xanchor = "left";
      slider.yanchor = "top";
      slider.y = p ? p.nyd[0] : 0;
      // room at both ends for the first and last step labels
      slider.pad = {
        t:
          Math.min((slider.pad && slider.pad.t) || 50, 70) +
          k * SLIDER_HEIGHT +
          (p ? 0 : belowLast + labels.below),
        b: 0,
        l: 24,
        r: 24,
      };
    });
    if (below > 1) {
      out.margin.b += (below - 1) * SLIDER_HEIGHT;
      height += (below - 1) * SLIDER_HEIGHT;
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
      return Plotly.newPlot(div, spec.data, layout, spec.config || {}).then(function () {
        return width < PHONE ? fitHeight(Plotly, div) : null;
      });
    });
  }

  // On a phone the sliders and the legend stack below the plot: once drawn, the figure
  // is made exactly as tall as they need (the plotting area keeps its size).
  function fitHeight(Plotly, gd) {
    var top = gd.getBoundingClientRect().top;
    var bottom = 0;
    gd.querySelectorAll(
      ".slider-container, .xaxislayer-above, .g-xtitle, .infolayer .annotation"
    ).forEach(function (el) {
      var r = el.getBoundingClientRect();
      if (r.height) {
        bottom = Math.max(bottom, r.bottom - top);
      }
    });
    var legend = gd.querySelector(".legend");
    var legendHeight = legend ? legend.getBoundingClientRect().height : 0;
    var size = gd._fullLayout._size;
    var need = Math.ceil(Math.max(bottom, size.t + size.h) + legendHeight + 14);
    if (Math.abs(need - gd._fullLayout.height) < 4) {
      return null;
    }
    gd.style.height = need + "px";
    return Plotly.relayout(gd, { height: need, "margin.b": need - size.t - size.h });
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

  // ------------------------------------------------------------------------------
  // 4. Embedded widgets. A page with widget state carries <meta name="book-widgets">;
  //    the widget manager (RequireJS and embed-amd.js, 3.6 MB) loads when a widget
  //    nears the screen, not with the page.
  // ------------------------------------------------------------------------------
  function loadScript(src, attributes) {
    return new Promise(function (resolve, reject) {
      var script = document.createElement("script");
      script.src = src;
      Object.keys(attributes || {}).forEach(function (name) {
        script.setAttribute(name, attributes[name]);
      });
      script.onload = resolve;
      script.onerror = reject;
      document.head.appendChild(script);
    });
  }

  // The manager typesets widget labels with MathJax 2's MathJax.Hub.Queue; the book
  // serves MathJax 3: forward it to MathJax.typesetPromise.
  function mathjax2Hub() {
    var mj = window.MathJax;
    if (mj && mj.typesetPromise && !mj.Hub) {
      mj.Hub = {
        Queue: function (command) {
          var element = command && command[2];
          if (element) {
            mj.typesetPromise([element]).catch(function () {});
          }
        },
      };
    }
  }

  var widgetsLoading = null;

  function loadWidgetManager() {
    var meta = document.querySelector('meta[name="book-widgets"]');
    if (!meta || widgetsLoading) {
      return widgetsLoading;
    }
    var vendor = new URL("vendor/", scriptUrl).href;
    // RequireJS reads this before it loads. The manager's modules live in its own
    // file, but each finds its style sheets' fonts next to its RequireJS name: name
    // them all in the vendored folder, where the fonts are.
    var manager = vendor + "html-manager/";
    window.require = {
      paths: {
        "@jupyter-widgets/html-manager/dist": manager.slice(0, -1),
        "@jupyter-widgets/html-manager": manager + "html-manager",
        "@jupyter-widgets/base": manager + "base",
        "@jupyter-widgets/controls": manager + "controls",
        "@jupyter-widgets/output": manager + "output",
      },
    };
    var mathjax = window.MathJax && window.MathJax.startup && window.MathJax.startup.promise;
    widgetsLoading = Promise.resolve(mathjax)
      .then(mathjax2Hub)
      .then(function () {
        return loadScript(vendor + "requirejs/require.js");
      })
      .then(function () {
        return loadScript(vendor + "html-manager/embed-amd.js", {
          "data-jupyter-widgets-cdn": meta.getAttribute("content"),
        });
      });
    return widgetsLoading;
  }

  function loadWidgetsNearTheScreen() {
    var views = document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]');
    if (!views.length || !document.querySelector('meta[name="book-widgets"]')) {
      return;
    }
    if (!("IntersectionObserver" in window)) {
      loadWidgetManager();
      return;
    }
    var observer = new IntersectionObserver(
      function (entries) {
        if (entries.some(function (entry) {
          return entry.isIntersecting;
        })) {
          observer.disconnect();
          loadWidgetManager();
        }
      },
      { rootMargin: "800px 0px" }
    );
    views.forEach(function (view) {
      observer.observe(view.parentElement);
    });
  }

  /** The widget manager loaded and the widgets drawn (for tests and printing). */
  window.bookLoadWidgets = function () {
    return loadWidgetManager() || Promise.resolve();
  };

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
      window.setTimeout(function () {
        drawFiguresNearTheScreen();
        loadWidgetsNearTheScreen();
      }, 0);
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", ready);
  } else {
    ready();
  }
  window.addEventListener("beforeprint", function () {
    window.bookDrawAllFigures();
    window.bookLoadWidgets();
  });
})();
