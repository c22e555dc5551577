/* sandbox-replay report: sorting and filtering of the runs table.
   Progressive enhancement only: with scripts off every row is shown in its built order
   and every link works. No network, no storage, no dependency. */
(function () {
  "use strict";

  function cellValue(row, index, kind) {
    var cell = row.cells[index];
    if (!cell) return kind === "num" ? 0 : "";
    var raw = cell.hasAttribute("data-sort") ? cell.getAttribute("data-sort") : cell.textContent;
    if (kind === "num") {
      var n = parseFloat(raw);
      return isNaN(n) ? 0 : n;
    }
    return raw.trim().toLowerCase();
  }

  function makeSortable(table) {
    var headers = table.tHead ? table.tHead.rows[0].cells : [];
    var body = table.tBodies[0];
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
        Array.prototype.forEach.call(headers, function (other) {
          if (other.hasAttribute("aria-sort")) other.setAttribute("aria-sort", "none");
        });
        th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
        var rows = Array.prototype.slice.call(body.rows);
        rows.forEach(function (row, position) { row.setAttribute("data-order", position); });
        rows.sort(function (a, b) {
          var x = cellValue(a, index, kind);
          var y = cellValue(b, index, kind);
          var order = x < y ? -1 : x > y ? 1 : 0;
          if (!ascending) order = -order;
          return order || (+a.getAttribute("data-order") - +b.getAttribute("data-order"));
        });
        rows.forEach(function (row) { body.appendChild(row); });
      });
    });
  }

  function makeFilterable(table, panel) {
    var status = panel.querySelector("[data-filter-status]");
    var text = panel.querySelector("[data-filter-text]");
    var count = panel.querySelector("[data-filter-count]");
    var rows = table.tBodies[0].rows;
    function apply() {
      var wanted = status.value;
      var needle = text.value.trim().toLowerCase();
      var shown = 0;
      Array.prototype.forEach.call(rows, function (row) {
        var ok = (!wanted || row.getAttribute("data-status") === wanted) &&
          (!needle || row.textContent.toLowerCase().indexOf(needle) !== -1);
        row.hidden = !ok;
        if (ok) shown += 1;
      });
      count.textContent = shown + " of " + rows.length + " runs shown";
    }
    status.addEventListener("change", apply);
    text.addEventListener("input", apply);
    panel.hidden = false;
    apply();
  }

  document.addEventListener("DOMContentLoaded", function () {
    var tables = document.querySelectorAll("table[data-sortable]");
    Array.prototype.forEach.call(tables, makeSortable);
    var panel = document.querySelector("[data-filters]");
    if (panel && tables.length) makeFilterable(tables[0], panel);
  });
})();
