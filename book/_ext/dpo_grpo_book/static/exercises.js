/* Answers on the page, no kernel (dpo_grpo_book.exercises): a form under the answer
   cell of each numeric and multiple-choice exercise of the page, answered in the
   browser from the page's entries of the hashed self-check key
   (#book-exercise-key). The verdict and its words are those dpo_grpo.exercises.check
   prints in a notebook: the same key, the rule of the docstring of
   dpo_grpo.exercises.selfcheck, the messages in the page's language. Nothing is sent
   or recorded. tests/browser/test_page_exercises.py compares the page with Python's
   check on the same answers (right, wrong, close, registered mistakes, either side of
   each tolerance's edge) in both editions. */
(function () {
  "use strict";

  // ------------------------------------------------------------------------------
  // 1. SHA-256 (FIPS 180-4), our own: crypto.subtle exists only on https and
  //    localhost pages (not file:// nor plain http) and answers asynchronously.
  // ------------------------------------------------------------------------------
  var K = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2,
  ];

  // The UTF-8 bytes of a string (Python's str.encode()).
  function utf8(text) {
    var bytes = [];
    for (var i = 0; i < text.length; i++) {
      var c = text.codePointAt(i);
      if (c > 0xffff) {
        i++; // the second half of a surrogate pair
      }
      if (c < 0x80) {
        bytes.push(c);
      } else if (c < 0x800) {
        bytes.push(0xc0 | (c >> 6), 0x80 | (c & 63));
      } else if (c < 0x10000) {
        bytes.push(0xe0 | (c >> 12), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
      } else {
        bytes.push(
          0xf0 | (c >> 18),
          0x80 | ((c >> 12) & 63),
          0x80 | ((c >> 6) & 63),
          0x80 | (c & 63)
        );
      }
    }
    return bytes;
  }

  function rotr(x, n) {
    return (x >>> n) | (x << (32 - n));
  }

  // The SHA-256 of a string's UTF-8 bytes, as 64 hexadecimal digits.
  function sha256(text) {
    var bytes = utf8(text);
    var n = bytes.length;
    // the message, a 1 bit, zeros and the length in bits: whole 64-byte blocks
    var words = new Array((((n + 8) >> 6) + 1) * 16);
    for (var i = 0; i < words.length; i++) {
      words[i] = 0;
    }
    for (i = 0; i < n; i++) {
      words[i >> 2] |= bytes[i] << (24 - 8 * (i & 3));
    }
    words[n >> 2] |= 0x80 << (24 - 8 * (n & 3));
    words[words.length - 2] = Math.floor(n / 0x20000000); // (8 n) >> 32
    words[words.length - 1] = (n * 8) | 0;
    var h = [
      0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
      0x5be0cd19,
    ];
    var w = new Array(64);
    for (var block = 0; block < words.length; block += 16) {
      for (var t = 0; t < 64; t++) {
        if (t < 16) {
          w[t] = words[block + t];
        } else {
          var s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >>> 3);
          var s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >>> 10);
          w[t] = (w[t - 16] + s0 + w[t - 7] + s1) | 0;
        }
      }
      var a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
      for (t = 0; t < 64; t++) {
        var S1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
        var ch = (e & f) ^ (~e & g);
        var t1 = (hh + S1 + ch + K[t] + w[t]) | 0;
        var S0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
        var maj = (a & b) ^ (a & c) ^ (b & c);
        var t2 = (S0 + maj) | 0;
        hh = g;
        g = f;
        f = e;
        e = (d + t1) | 0;
        d = c;
        c = b;
        b = a;
        a = (t1 + t2) | 0;
      }
      h[0] = (h[0] + a) | 0;
      h[1] = (h[1] + b) | 0;
      h[2] = (h[2] + c) | 0;
      h[3] = (h[3] + d) | 0;
      h[4] = (h[4] + e) | 0;
      h[5] = (h[5] + f) | 0;
      h[6] = (h[6] + g) | 0;
      h[7] = (h[7] + hh) | 0;
    }
    return h
      .map(function (x) {
        return ("0000000" + (x >>> 0).toString(16)).slice(-8);
      })
      .join("");
  }

  // ------------------------------------------------------------------------------
  // 2. Python's text: str.format's {name} fields, a tuple's repr, and f"{w:.3g}" of
  //    a tolerance w = 2**e, digit for digit (Python rounds half to even on the exact
  //    decimal value; toPrecision rounds a tie up, and 2**-5 = 0.03125 is a tie).
  // ------------------------------------------------------------------------------
  function format(template, fields) {
    return template.replace(/\{\{|\}\}|\{(\w+)\}/g, function (all, name) {
      if (!name) {
        return all.charAt(0);
      }
      return String(fields[name]);
    });
  }

  function pyTuple(shape) {
    return shape.length === 1 ? "(" + shape[0] + ",)" : "(" + shape.join(", ") + ")";
  }

  // The decimal digits of an integer given as little-endian digits, times m.
  function times(digits, m) {
    var carry = 0;
    for (var i = 0; i < digits.length; i++) {
      var v = digits[i] * m + carry;
      digits[i] = v % 10;
      carry = Math.floor(v / 10);
    }
    while (carry) {
      digits.push(carry % 10);
      carry = Math.floor(carry / 10);
    }
    return digits;
  }

  // f"{2.0**e:.3g}" for an integer e: 2**e = D * 10**q exactly, with D = 2**e, q = 0
  // (e >= 0) or D = 5**-e, q = e (e < 0).
  function powerOfTwoG3(e) {
    var digits = [1];
    for (var i = 0; i < Math.abs(e); i++) {
      times(digits, e >= 0 ? 2 : 5);
    }
    var all = digits.reverse().join("");
    var x = all.length - 1 + (e >= 0 ? 0 : e); // 2**e = d.ddd * 10**x
    var head = (all + "00").slice(0, 3);
    var rest = all.slice(3);
    var first = rest.charAt(0);
    var beyondHalf = /[1-9]/.test(rest.slice(1));
    // more than half a unit: up; exactly half: to the even digit
    var up = first > "5" || (first === "5" && (beyondHalf || Number(head.charAt(2)) % 2 === 1));
    if (up) {
      head = String(Number(head) + 1);
      if (head.length > 3) {
        head = head.slice(0, 3);
        x += 1;
      }
    }
    if (x >= -4 && x < 3) {
      var fixed =
        x >= 0
          ? head.slice(0, x + 1) + "." + head.slice(x + 1)
          : "0." + new Array(-x).join("0") + head;
      return fixed.replace(/\.?0+$/, "").replace(/\.$/, "");
    }
    var mantissa = (head.charAt(0) + "." + head.slice(1)).replace(/\.?0+$/, "");
    var exp = Math.abs(x) < 10 ? "0" + Math.abs(x) : String(Math.abs(x));
    return mantissa + "e" + (x < 0 ? "-" : "+") + exp;
  }

  // ------------------------------------------------------------------------------
  // 3. The rule (dpo_grpo.exercises.selfcheck's docstring): hashes are the first 16
  //    hex digits of sha256("salt|tier|i|k"); a value x is within a fingerprint when
  //    y = (x - o) / 2**e is finite, |y| < 2**52 and some k in floor(y) - 2 ..
  //    floor(y) + 2 has |y - k| <= 1 and the hash of k. Doubles, as NumPy's.
  // ------------------------------------------------------------------------------
  var MAX_STEPS = 4503599627370496; // 2**52

  function exerciseSalt(id) {
    return sha256("dpo_grpo selfcheck " + id).slice(0, 16);
  }

  function digest(salt, tier, parts) {
    return sha256([salt, tier].concat(parts).join("|")).slice(0, 16);
  }

  // 2**e exactly (halving and doubling a power of two is exact; Math.pow need not be).
  function step(e) {
    var w = 1;
    for (var i = 0; i < e; i++) {
      w *= 2;
    }
    for (i = 0; i > e; i--) {
      w /= 2;
    }
    return w;
  }

  function sameShape(a, b) {
    return a.length === b.length && a.every(function (d, i) {
      return d === b[i];
    });
  }

  // Per value (flattened): whether it is within the fingerprint fp (all false for none,
  // or another shape).
  function withinFingerprint(answer, fp, salt, tier) {
    var out = answer.values.map(function () {
      return false;
    });
    if (!fp || !sameShape(answer.shape, fp.shape)) {
      return out;
    }
    answer.values.forEach(function (x, i) {
      var y = (x - fp.o[i]) / step(fp.e[i]);
      if (!isFinite(y) || Math.abs(y) >= MAX_STEPS) {
        return;
      }
      var f = Math.floor(y);
      for (var k = f - 2; k <= f + 2; k++) {
        // String(k) of an integer below 2**53 is its decimal digits, as Python's str
        if (Math.abs(y - k) <= 1 && digest(salt, tier, [i, k]) === fp.h[i]) {
          out[i] = true;
          return;
        }
      }
    });
    return out;
  }

  function all(flags) {
    return flags.every(Boolean);
  }

  // dpo_grpo.exercises.feedback.numeric_reply on the self-check's key.
  function checkNumeric(entry, salt, answer, messages) {
    var exact = entry.exact;
    if (!sameShape(answer.shape, exact.shape)) {
      var shapes = { want: pyTuple(exact.shape), got: pyTuple(answer.shape) };
      return { status: "incorrect", message: format(messages.shape, shapes) };
    }
    if (!answer.values.every(isFinite)) {
      return { status: "incorrect", message: messages.nonFinite };
    }
    var ok = withinFingerprint(answer, exact, salt, "exact");
    if (all(ok)) {
      return { status: "correct", message: messages.correct };
    }
    for (var i = 0; i < entry.mistakes.length; i++) {
      var m = entry.mistakes[i];
      if (m.fp && all(withinFingerprint(answer, m.fp, salt, "mistake" + i))) {
        var said = format(messages.notQuite, { hint: m.hint });
        return { status: "incorrect", message: said };
      }
    }
    var close = all(withinFingerprint(answer, entry.close, salt, "close"));
    var bad = [];
    ok.forEach(function (inside, j) {
      if (!inside) {
        bad.push(j);
      }
    });
    var tols = bad
      .map(function (j) {
        return "±" + powerOfTwoG3(exact.e[j]);
      })
      .join(", ");
    if (ok.length === 1) {
      return {
        status: "incorrect",
        message: format(close ? messages.closeOne : messages.outsideOne, { tols: tols }),
      };
    }
    var which = bad
      .map(function (j) {
        return j + 1;
      })
      .join(", ");
    return {
      status: "incorrect",
      message: format(close ? messages.closeMany : messages.outsideMany, {
        which: which,
        n: ok.length,
        tols: tols,
      }),
    };
  }

  // dpo_grpo.exercises.selfcheck._check_choice, for one of the offered letters.
  function checkChoice(entry, salt, letter, messages) {
    var h = digest(salt, "choice", [letter.trim().toLowerCase()]);
    if (h === entry.answer) {
      return { status: "correct", message: messages.correct };
    }
    var hint = entry.hints[h] === undefined ? messages.reread : entry.hints[h];
    return { status: "incorrect", message: format(messages.notThisOne, { hint: hint }) };
  }

  // ------------------------------------------------------------------------------
  // 4. What was typed, read as Python reads the same numbers: "0.25", "0.1, 0.2",
  //    "0.1 0.2", "[0.1, 0.2]", "[[1, 2], [3, 4]]" (a shape, as np.asarray gives it);
  //    "nan" and "inf" too (check answers them). Chinese punctuation is accepted.
  // ------------------------------------------------------------------------------
  var NUMBER = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?$/i;
  var SPECIAL = /^([+-]?)(inf|infinity|nan)$/i;

  function tokens(text) {
    var normal = text
      .replace(/[，、]/g, ",")
      .replace(/[［【]/g, "[")
      .replace(/[］】]/g, "]")
      .replace(/（/g, "(")
      .replace(/）/g, ")")
      .replace(/[−–]/g, "-");
    return normal.match(/[\[\]\(\),]|[^\s\[\]\(\),]+/g) || [];
  }

  function number(token) {
    if (NUMBER.test(token)) {
      return Number(token);
    }
    var m = SPECIAL.exec(token);
    if (!m) {
      return undefined;
    }
    var v = m[2].toLowerCase() === "nan" ? NaN : Infinity;
    return m[1] === "-" ? -v : v;
  }

  // A sequence of values up to `close` (or the end): {items, commas, pos}; null when
  // the text is not one.
  function sequence(toks, pos, close) {
    var items = [];
    var commas = 0;
    var afterValue = false;
    while (pos < toks.length && toks[pos] !== close) {
      var t = toks[pos];
      if (t === ",") {
        if (!afterValue) {
          return null;
        }
        commas++;
        afterValue = false;
        pos++;
      } else if (t === "[" || t === "(") {
        var inner = sequence(toks, pos + 1, t === "[" ? "]" : ")");
        if (!inner || toks[inner.pos] !== (t === "[" ? "]" : ")")) {
          return null;
        }
        items.push(inner.items);
        afterValue = true;
        pos = inner.pos + 1;
      } else {
        var v = number(t);
        if (v === undefined) {
          return null;
        }
        items.push(v);
        afterValue = true;
        pos++;
      }
    }
    return { items: items, commas: commas, pos: pos };
  }

  // The shape of nested lists, as np.asarray gives it; null when they are ragged.
  function shapeOf(value) {
    if (!Array.isArray(value)) {
      return [];
    }
    if (!value.length) {
      return [0];
    }
    var inner = value.map(shapeOf);
    for (var i = 0; i < inner.length; i++) {
      if (!inner[i] || !sameShape(inner[i], inner[0])) {
        return null;
      }
    }
    return [value.length].concat(inner[0]);
  }

  function flatten(value, out) {
    if (Array.isArray(value)) {
      value.forEach(function (v) {
        flatten(v, out);
      });
    } else {
      out.push(value);
    }
    return out;
  }

  // {shape, values} of the typed answer; {empty: true}; {ragged: true} (nested lists
  // of different lengths: NumPy refuses them); or null (not numbers).
  function parseAnswer(text) {
    var toks = tokens(text);
    if (!toks.length) {
      return { empty: true };
    }
    var top = sequence(toks, 0, null);
    if (!top || top.pos !== toks.length) {
      return null;
    }
    // one value and no comma is that value; anything else a list, as in Python
    var value = top.items.length === 1 && !top.commas ? top.items[0] : top.items;
    var shape = shapeOf(value);
    if (!shape) {
      return { ragged: true };
    }
    return { shape: shape, values: flatten(value, []) };
  }

  // ------------------------------------------------------------------------------
  // 5. The verdict line: Feedback's repr ("✅ Exercise 04.2: correct.").
  // ------------------------------------------------------------------------------
  var MARKS = { correct: "✅", incorrect: "❌", "not attempted": "…", error: "⚠️" };

  function keyData() {
    var el = document.getElementById("book-exercise-key");
    return el ? JSON.parse(el.textContent) : null;
  }

  // The line the page shows for `answer` (typed text, or a letter) to exercise `id`.
  function verdict(data, id, answer) {
    var entry = data.exercises[id];
    var salt = exerciseSalt(id);
    var messages = data.messages;
    var reply;
    // no answer yet, or no number: the form's own words (a notebook has no such case)
    function prompt(status, mark, text) {
      return { status: status, text: mark + " " + text };
    }
    if (entry.kind === "choice") {
      if (!answer) {
        return prompt("not attempted", MARKS["not attempted"], data.ui.choose);
      }
      reply = checkChoice(entry, salt, answer, messages);
    } else {
      var parsed = parseAnswer(answer);
      if (parsed && parsed.empty) {
        return prompt("not attempted", MARKS["not attempted"], data.ui.empty);
      }
      if (!parsed) {
        return prompt("unreadable", MARKS.error, data.ui.unreadable);
      }
      // ragged lists: np.asarray refuses them, and check says so
      reply = parsed.ragged
        ? { status: "incorrect", message: format(messages.notNumbers, { type: "list" }) }
        : checkNumeric(entry, salt, parsed, messages);
    }
    var said = format(messages.exercise, { id: id, message: reply.message });
    return { status: reply.status, text: MARKS[reply.status] + " " + said };
  }

  // ------------------------------------------------------------------------------
  // 6. The forms, each under its exercise's answer cell (the cell that is no solution
  //    and calls check("ID", answer)).
  // ------------------------------------------------------------------------------
  var ANSWER_CELL = /\bcheck\(\s*["']([^"']+)["']\s*,\s*answer\s*\)/;

  function element(tag, className, text) {
    var el = document.createElement(tag);
    if (className) {
      el.className = className;
    }
    if (text !== undefined) {
      el.textContent = text;
    }
    return el;
  }

  function answerLabel(entry, ui) {
    var shape = entry.exact.shape;
    if (!shape.length) {
      return ui.number;
    }
    if (shape.length === 1) {
      return format(ui.numbers, { n: shape[0] });
    }
    return format(ui.array, { shape: pyTuple(shape) });
  }

  function buildForm(data, id) {
    var entry = data.exercises[id];
    var ui = data.ui;
    var slug = "book-exercise-" + id.replace(/[^\w-]/g, "-");
    var form = element("form", "book-exercise");
    form.setAttribute("data-exercise", id);
    form.setAttribute("novalidate", "");
    var fieldset = element("fieldset");
    var read;
    if (entry.kind === "choice") {
      fieldset.appendChild(element("legend", "book-exercise-label", ui.choice));
      var options = element("div", "book-exercise-options");
      entry.options.forEach(function (letter) {
        var label = element("label", "book-exercise-option");
        var radio = element("input");
        radio.type = "radio";
        radio.name = slug;
        radio.value = letter;
        label.appendChild(radio);
        label.appendChild(element("span", null, "(" + letter + ")"));
        options.appendChild(label);
      });
      fieldset.appendChild(options);
      read = function () {
        var chosen = form.querySelector("input[type=radio]:checked");
        return chosen ? chosen.value : "";
      };
    } else {
      var label = element("label", "book-exercise-label", answerLabel(entry, ui));
      label.htmlFor = slug;
      fieldset.appendChild(label);
      var input = element("input", "book-exercise-input");
      input.type = "text";
      input.id = slug;
      input.autocomplete = "off";
      input.setAttribute("autocapitalize", "off");
      input.setAttribute("autocorrect", "off");
      input.setAttribute("enterkeyhint", "done");
      input.spellcheck = false;
      fieldset.appendChild(input);
      read = function () {
        return input.value;
      };
    }
    var row = element("div", "book-exercise-row");
    row.appendChild(element("button", "book-exercise-check", ui.check));
    row.lastChild.type = "submit";
    row.appendChild(element("span", "book-exercise-note", ui.note));
    fieldset.appendChild(row);
    var line = element("p", "book-exercise-verdict");
    line.setAttribute("role", "status");
    line.setAttribute("aria-live", "polite");
    fieldset.appendChild(line);
    form.appendChild(fieldset);
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var v = verdict(data, id, read());
      line.textContent = v.text;
      line.setAttribute("data-status", v.status);
    });
    return form;
  }

  function codeOf(cell) {
    var pre = cell.querySelector(".cell_input pre");
    return pre ? pre.textContent : "";
  }

  function addForms() {
    var data = keyData();
    if (!data) {
      return;
    }
    var done = {};
    document.querySelectorAll("div.cell").forEach(function (cell) {
      if (cell.classList.contains("tag_solution")) {
        return;
      }
      var m = ANSWER_CELL.exec(codeOf(cell));
      if (!m || !data.exercises[m[1]] || done[m[1]]) {
        return;
      }
      done[m[1]] = true;
      cell.parentNode.insertBefore(buildForm(data, m[1]), cell.nextSibling);
    });
  }

  /** The page's checker, for tests: the line a typed answer gets, without the form. */
  window.bookExercises = {
    sha256: sha256,
    toleranceText: powerOfTwoG3,
    parse: parseAnswer,
    verdict: function (id, answer) {
      return verdict(keyData(), id, answer).text;
    },
  };

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", addForms);
  } else {
    addForms();
  }
})();
