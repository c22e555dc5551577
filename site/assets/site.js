/* sandbox-replay report: the colour scheme picker; sorting and filtering of the runs
   table, and its charts as filters; a run's search, its permalinks (resolved from any
   page of the run) and their copy links.
   Progressive enhancement only: with scripts off every row is shown in its built order,
   every link works and the colours follow the system. No network, no dependency: the
   search index is read as script files beside the pages (runs/<run>/search/, see
   report/search_index.py), which a browser runs from file:// where it would refuse a
   fetch. The one thing kept is the reader's colour scheme, in localStorage where the
   browser allows it (file:// may not: then the choice lasts for the page).
   Loaded in the page's head, so that the scheme is set before the first paint. */
(function () {
  "use strict";

  /* -- colour scheme: "" follows the system; "light" or "dark" is the reader's choice */
  var SCHEME_KEY = "sandbox-replay-scheme";

  function storedScheme() {
    try { return window.localStorage.getItem(SCHEME_KEY) || ""; } catch (e) { return ""; }
  }

  function applyScheme(value) {
    if (value === "light" || value === "dark") {
      document.documentElement.setAttribute("data-scheme", value);
    } else {
      document.documentElement.removeAttribute("data-scheme");
    }
  }

  applyScheme(storedScheme());

  function makeSchemePicker(select) {
    var current = document.documentElement.getAttribute("data-scheme") || "";
    select.value = current;
    select.addEventListener("change", function () {
      applyScheme(select.value);
      try {
        if (select.value) window.localStorage.setItem(SCHEME_KEY, select.value);
        else window.localStorage.removeItem(SCHEME_KEY);
      } catch (e) { /* no storage here: the choice holds for this page */ }
    });
    window.addEventListener("storage", function (event) {
      if (event.key !== SCHEME_KEY) return;
      applyScheme(event.newValue || "");
      select.value = event.newValue || "";
    });
    select.closest("label").hidden = false;
  }

  /* The sticky contents bar of a run page may wrap: keep the sticky file names below it. */
  function trackTocHeight(toc) {
    function measure() {
      var sticky = window.getComputedStyle(toc).position === "sticky";
      document.documentElement.style.setProperty("--toc-h", (sticky ? toc.offsetHeight : 0) + "px");
    }
    measure();
    if (window.ResizeObserver) new window.ResizeObserver(measure).observe(toc);
    window.addEventListener("resize", measure);
  }

  function cellValue(row, index, kind) {
    var cell = row.cells[index];
    if (!cell) return kind === "num" ? 0 : "";
    var raw = cell.hasAttribute("data-sort") ? cell.getAttribute("data-sort") : cell.textContent;
    if (kind === "num") {
      var n = parseFloat(raw.replace(/,/g, ""));
      return isNaN(n) ? 0 : n;
    }
    return raw.trim().toLowerCase();
  }

  /* The index's filter and sort live in the URL fragment
     (#status=blocked&sev=critical&run=first_wave&q=net&sort=9-desc), so a filtered, sorted
     view can be linked and reloaded. */
  var STATE_KEYS = ["status", "sev", "run", "q", "sort"];

  function readState() {
    var state = { status: "", sev: "", run: "", q: "", sort: "" };
    var hash = window.location.hash.slice(1);
    if (hash.indexOf("=") === -1) return state;
    hash.split("&").forEach(function (pair) {
      var at = pair.indexOf("=");
      if (at < 0) return;
      var name = pair.slice(0, at), value;
      try { value = decodeURIComponent(pair.slice(at + 1).replace(/\+/g, " ")); } catch (e) { return; }
      if (name in state) state[name] = value;
    });
    return state;
  }

  function writeState(state) {
    var parts = [];
    STATE_KEYS.forEach(function (name) {
      if (state[name]) parts.push(name + "=" + encodeURIComponent(state[name]));
    });
    var url = window.location.pathname + window.location.search + (parts.length ? "#" + parts.join("&") : "");
    try { window.history.replaceState(null, "", url); } catch (e) { /* file:// may refuse */ }
  }

  function makeSortable(table, state) {
    var headers = table.tHead ? table.tHead.rows[0].cells : [];
    var body = table.tBodies[0];
    function sortBy(index, ascending) {
      var th = headers[index];
      var kind = th.getAttribute("data-sort-key");
      Array.prototype.forEach.call(headers, function (other) {
        if (other.hasAttribute("aria-sort")) other.setAttribute("aria-sort", "none");
      });
      th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
      var rows = Array.prototype.slice.call(body.rows);
      rows.forEach(function (row, position) {
        if (!row.hasAttribute("data-built")) row.setAttribute("data-built", position);
      });
      rows.sort(function (a, b) {
        var x = cellValue(a, index, kind);
        var y = cellValue(b, index, kind);
        var order = x < y ? -1 : x > y ? 1 : 0;
        if (!ascending) order = -order;
        return order || (+a.getAttribute("data-built") - +b.getAttribute("data-built"));
      });
      rows.forEach(function (row) { body.appendChild(row); });
    }
    Array.prototype.forEach.call(headers, function (th, index) {
      var kind = th.getAttribute("data-sort-key");
      if (!kind) return;
      var button = document.createElement("button");
      button.type = "button";
      while (th.firstChild) button.appendChild(th.firstChild);
      th.appendChild(button);
      th.setAttribute("aria-sort", "none");
      button.addEventListener("click", function () {
        var ascending = th.getAttribute("aria-sort") !== "ascending";
        sortBy(index, ascending);
        state.sort = index + (ascending ? "-asc" : "-desc");
        writeState(state);
      });
    });
    var asked = /^(\d+)-(asc|desc)$/.exec(state.sort);
    if (asked && headers[+asked[1]] && headers[+asked[1]].getAttribute("data-sort-key")) {
      sortBy(+asked[1], asked[2] === "asc");
    }
  }

  function decoded(value) {
    try { return decodeURIComponent(value); } catch (e) { return value; }
  }

  function choose(select, value) {
    var safe = value.replace(/[^a-z_]/g, "");
    select.value = safe && select.querySelector("option[value='" + safe + "']") ? safe : "";
  }

  function makeFilterable(table, panel, state) {
    var status = panel.querySelector("[data-filter-status]");
    var sev = panel.querySelector("[data-filter-sev]");
    var text = panel.querySelector("[data-filter-text]");
    var only = panel.querySelector("[data-filter-run]");
    var count = panel.querySelector("[data-filter-count]");
    var rows = table.tBodies[0].rows;
    function apply() {
      var wanted = status.value;
      var severity = sev.value;
      var needle = text.value.trim().toLowerCase();
      var shown = 0;
      Array.prototype.forEach.call(rows, function (row) {
        var ok = (!wanted || row.getAttribute("data-status") === wanted) &&
          (!severity || (" " + row.getAttribute("data-severities") + " ").indexOf(" " + severity + " ") !== -1) &&
          (!state.run || decoded(row.getAttribute("data-run") || "") === state.run) &&
          (!needle || row.textContent.toLowerCase().indexOf(needle) !== -1);
        row.hidden = !ok;
        if (ok) shown += 1;
      });
      only.hidden = !state.run;
      only.textContent = state.run ? "Only \u201c" + state.run + "\u201d: show every run" : "";
      count.textContent = shown + " of " + rows.length + " runs shown";
    }
    function changed() {
      state.status = status.value;
      state.sev = sev.value;
      state.q = text.value;
      writeState(state);
      apply();
    }
    function show() {
      choose(status, state.status);
      choose(sev, state.sev);
      text.value = state.q;
      apply();
    }
    status.addEventListener("change", changed);
    sev.addEventListener("change", changed);
    text.addEventListener("input", changed);
    only.addEventListener("click", function () {
      state.run = "";
      writeState(state);
      apply();
    });
    /* A chart's bar or legend key filters the table: one run, one status or one severity. */
    Array.prototype.forEach.call(document.querySelectorAll(".charts [data-filter]"), function (mark) {
      mark.classList.add("clickable");
      mark.addEventListener("click", function () {
        var filter = mark.getAttribute("data-filter");
        var at = filter.indexOf("=");
        var name = filter.slice(0, at), value = decoded(filter.slice(at + 1));
        state.status = ""; state.sev = ""; state.run = ""; state.q = "";
        state[name] = value;
        writeState(state);
        show();
        var heading = document.getElementById("runs-h");
        if (heading && heading.scrollIntoView) heading.scrollIntoView();
      });
    });
    panel.hidden = false;
    show();
  }

  /* -- a run's search index: loaded one script file at a time, on demand */

  /* An entry is [key, kind, page, note, anchor]; the anchor of a request or finding
     is left out where it is the default one (report/search_index.py). */
  var DEFAULT_ANCHORS = { request: "req-", finding: "f-" };

  function entryHref(e) {
    var anchor = e[4] || (DEFAULT_ANCHORS[e[1]] || "") + e[0];
    return e[2] + "#" + anchor;
  }

  var KIND_LABELS = {
    request: "request", finding: "finding", code: "finding code",
    rule: "policy rule", input: "input file", line: "input line"
  };

  function SearchIndex(src) {
    this.base = src.replace(/[^\/]*$/, "");
    this.src = src;
    this.manifest = null;
    this.parts = {};
    this.waiting = {};
  }

  SearchIndex.prototype.load = function (name, done, failed) {
    var self = this;
    if (self.parts[name]) { done(self.parts[name]); return; }
    if (self.waiting[name]) { self.waiting[name].push([done, failed]); return; }
    self.waiting[name] = [[done, failed]];
    var script = document.createElement("script");
    script.src = name === "index.js" ? self.src : self.base + name;
    script.onerror = function () {
      var calls = self.waiting[name] || [];
      delete self.waiting[name];
      calls.forEach(function (c) { c[1](); });
    };
    document.head.appendChild(script);
  };

  SearchIndex.prototype.arrived = function (name, value) {
    this.parts[name] = value;
    var calls = this.waiting[name] || [];
    delete this.waiting[name];
    calls.forEach(function (c) { c[0](value); });
  };

  /* Call done(entries) with up to limit entries whose lower-cased key starts with query. */
  SearchIndex.prototype.find = function (query, limit, done, failed) {
    var self = this;
    var q = query.toLowerCase();
    self.load("index.js", function (manifest) {
      var parts = manifest.parts;
      if (!parts.length) { done([]); return; }
      var lo = 0, hi = parts.length - 1, start = 0;
      while (lo <= hi) {
        var mid = (lo + hi) >> 1;
        if (parts[mid][0] <= q) { start = mid; lo = mid + 1; } else { hi = mid - 1; }
      }
      var found = [];
      (function scan(i) {
        self.load(parts[i][1], function (entries) {
          for (var n = 0; n < entries.length; n += 1) {
            var key = entries[n][0].toLowerCase();
            if (key.lastIndexOf(q, 0) === 0) {
              found.push(entries[n]);
              if (found.length >= limit) { done(found); return; }
            } else if (key > q) { done(found); return; }
          }
          if (i + 1 < parts.length) scan(i + 1); else done(found);
        }, failed);
      })(start);
    }, failed);
  };

  var current = null;
  window.SandboxReplaySearch = {
    manifest: function (value) { if (current) current.arrived("index.js", value); },
    part: function (name, entries) { if (current) current.arrived(name, entries); }
  };

  function runRoot(form) {
    return form.getAttribute("data-run-page").replace(/[^\/]*$/, "");
  }

  function makeSearch(form, index) {
    var input = form.querySelector("input");
    var status = form.querySelector(".search-status");
    var list = form.querySelector(".search-results");
    var root = runRoot(form);
    var asked = 0, timer = null;
    function show(entries, query) {
      list.textContent = "";
      entries.forEach(function (e) {
        var item = document.createElement("li");
        var link = document.createElement("a");
        link.href = root + entryHref(e);
        var key = document.createElement("code");
        key.textContent = e[0];
        link.appendChild(key);
        var kind = document.createElement("span");
        kind.className = "search-kind";
        kind.textContent = " " + (KIND_LABELS[e[1]] || e[1]);
        link.appendChild(kind);
        if (e[3]) {
          var note = document.createElement("span");
          note.className = "search-note";
          note.textContent = " · " + e[3];
          link.appendChild(note);
        }
        item.appendChild(link);
        list.appendChild(item);
      });
      status.textContent = entries.length
        ? (entries.length >= 50 ? "First 50 matches" : entries.length + (entries.length === 1 ? " match" : " matches")) + " for \u201c" + query + "\u201d"
        : "Nothing in this run starts with \u201c" + query + "\u201d";
    }
    function search() {
      var query = input.value.trim();
      var mine = ++asked;
      if (!query) { list.textContent = ""; status.textContent = ""; return; }
      status.textContent = "Searching\u2026";
      index.find(query, 50, function (entries) {
        if (mine === asked) show(entries, query);
      }, function () {
        if (mine === asked) status.textContent = "The search index of this run could not be read.";
      });
    }
    // The manifest is small: read it as soon as the reader heads for the box.
    function warm() { index.load("index.js", function () {}, function () {}); }
    input.addEventListener("focus", warm);
    input.addEventListener("pointerenter", warm);
    input.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(search, 30);
    });
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var first = list.querySelector("a");
      if (first) window.location.href = first.href;
      else search();
    });
    form.hidden = false;
  }

  /* A permalink names a row by its content (req-<id>, f-<fingerprint>); where the row is
     not on this page, the search index says which page holds it. */
  function resolvePermalink(form, index) {
    var hash = window.location.hash.slice(1);
    if (!hash) return;
    var id;
    try { id = decodeURIComponent(hash); } catch (e) { return; }
    if (document.getElementById(id)) return;
    var key;
    if (id.lastIndexOf("req-", 0) === 0) {
      try { key = decodeURIComponent(id.slice(4).replace(/~/g, "%")); } catch (e) { key = id; }
    } else if (id.lastIndexOf("f-", 0) === 0) {
      key = id.slice(2);
    } else {
      return;
    }
    var root = runRoot(form);
    function go(entries) {
      for (var n = 0; n < entries.length; n += 1) {
        var href = entryHref(entries[n]);
        if (href.slice(href.indexOf("#") + 1) === id) {
          window.location.replace(root + href);
          return true;
        }
      }
      return false;
    }
    var status = form.querySelector(".search-status");
    function missing() { status.textContent = "Nothing in this run is named \u201c" + id + "\u201d."; }
    index.find(key, 200, function (entries) {
      if (go(entries)) return;
      index.find(id, 200, function (more) { if (!go(more)) missing(); }, missing);
    }, missing);
  }

  /* Permalinks were once by position: #request-N, the Nth request row of the run, and
     #finding-N, the Nth finding of its result record (both counted from 1). Such a link
     names the page that held the row, and a page holds the same rows while the inputs are
     the same: the join table says the position of its first row (data-first-position), each
     finding its own (data-position), so the page finds the row and goes to its permalink.
     A request the page does not hold is sent to the join-table page that holds its position
     (the search box says how many rows a page holds); anything else is said in a notice,
     rather than leaving the reader at the top of the page. Returns whether it took the link. */
  function resolvePosition(form) {
    var match = /^#(request|finding)-(\d+)$/.exec(window.location.hash);
    if (!match || document.getElementById(match[1] + "-" + match[2])) return false;
    var kind = match[1], n = +match[2], row = null;
    if (kind === "request") {
      Array.prototype.forEach.call(document.querySelectorAll("tbody[data-first-position]"), function (body) {
        var at = n - +body.getAttribute("data-first-position");
        if (!row && at >= 0 && at < body.rows.length) row = body.rows[at];
      });
    } else {
      row = document.querySelector("tr[data-position='" + n + "']");
    }
    if (row && row.id) {
      window.location.replace("#" + encodeURIComponent(row.id));
      return true;
    }
    if (kind === "request" && form && n >= 1 && n <= +form.getAttribute("data-requests")) {
      var rows = +form.getAttribute("data-join-page-rows");
      var number = String(Math.ceil(n / (rows || 1)));
      while (number.length < 4) number = "0" + number;
      var page = rows ? "join/page-" + number + ".html" : "index.html";
      var target = new URL(runRoot(form) + page, window.location.href).href;
      if (target !== window.location.href.split("#")[0]) {
        window.location.replace(target + window.location.hash);
        return true;
      }
    }
    var notice = document.getElementById("old-link-notice") || document.createElement("p");
    notice.id = "old-link-notice";
    notice.className = "notice";
    notice.setAttribute("role", "alert");
    notice.textContent = "This link names " + kind + " " + n + " by its position, as links made " +
      "before permalinks named rows by their content did, and this page holds no such " + kind + ". " +
      "Find it by its request id or finding code" + (form ? " with the search box below." : ".");
    var main = document.querySelector("main");
    if (main && !notice.parentNode) main.insertBefore(notice, main.firstChild);
    window.scrollTo(0, 0);
    return true;
  }

  function copyLinks(form) {
    var runPage = form.getAttribute("data-run-page");
    document.addEventListener("click", function (event) {
      var link = event.target.closest ? event.target.closest("a.permalink") : null;
      if (!link) return;
      var url = new URL(runPage + link.getAttribute("href"), window.location.href).href;
      link.setAttribute("data-permalink", url);
      if (navigator.clipboard && navigator.clipboard.writeText) {
        navigator.clipboard.writeText(url).then(function () {
          link.setAttribute("data-copied", "");
          setTimeout(function () { link.removeAttribute("data-copied"); }, 1500);
        }, function () {});
      }
    });
  }

  /* A link to an input line names a row's opening line: mark every line of that row. The
     build marks the opening line with the number of the line that closes the row
     (data-row-end; report/highlight.py); a line without one is a row of its own. */
  var marked = [];
  function markRow() {
    marked.forEach(function (line) { line.classList.remove("row-hit"); });
    marked = [];
    var id;
    try { id = decodeURIComponent(window.location.hash.slice(1)); } catch (e) { return; }
    var line = id && document.getElementById(id);
    if (!line || !line.classList.contains("line")) return;
    var end = line.getAttribute("data-row-end");
    var last = end ? line.id.replace(/\d+$/, end) : line.id;
    for (; line; line = line.nextElementSibling) {
      marked.push(line);
      if (line.id === last) break;
    }
    marked.forEach(function (hit) { hit.classList.add("row-hit"); });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var picker = document.querySelector("[data-scheme-pick]");
    if (picker) makeSchemePicker(picker);
    var toc = document.querySelector(".page-toc");
    if (toc) trackTocHeight(toc);
    markRow();
    window.addEventListener("hashchange", markRow);
    var form = document.querySelector("form.run-search");
    var search = form && form.getAttribute("data-search-index") ? form : null;
    if (search) {
      current = new SearchIndex(search.getAttribute("data-search-index"));
      makeSearch(search, current);
      copyLinks(search);
    }
    function resolve() {
      if (!resolvePosition(search) && search) resolvePermalink(search, current);
    }
    resolve();
    window.addEventListener("hashchange", resolve);
    var tables = document.querySelectorAll("table[data-sortable]");
    var state = readState();
    Array.prototype.forEach.call(tables, function (table) { makeSortable(table, state); });
    var panel = document.querySelector("[data-filters]");
    if (panel && tables.length) makeFilterable(tables[0], panel, state);
  });
})();
