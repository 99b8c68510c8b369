/* liqo-dash page helpers (no inline scripts: the Content-Security-Policy forbids them).
 *
 * - The freshness badge ticks: its age counts up every second from the server's own clock, and it
 *   turns amber past two refresh intervals and red past five (plus its own poll period, data-poll: it
 *   learns of newer refreshes only when it polls), without waiting for the next poll.
 *   While nothing else on it changes its poll answers 304 with the newest refresh time (X-Fresh-At),
 *   which the badge takes (its data-fresh-at and its tooltip's time) instead of a new render.
 * - Live regions ([data-live]) poll their page: the poll asks for the URL the browser shows now (so
 *   the user's filters, sort and page stay), sends the ETag of what it shows, and keeps it on 304.
 *   A fragment region ([data-live=fragment]: a namespace's or a change's status, a bulk's progress,
 *   the freshness badge) polls its own hx-get URL the same way. Each region keeps its own ETag (by id).
 * - Forms follow Liqo: the remote namespace name is used only with SelectedName, so its field is
 *   disabled (and so never sent) for the other strategies.
 * - A typed confirmation ([data-confirm-name]) keeps its form's submit button disabled until the text
 *   matches (the server checks it again).
 * - The edit form's conflict choices: picking mine or theirs for a field both sides changed puts that
 *   value in the field ([data-input] on the radio), so the fields and the preview show what applies.
 * - Tables wider than the screen scroll inside their own box; such a box is made reachable with the
 *   keyboard (tabindex) and named, so it can be scrolled without a mouse.
 * - A <details data-keep-open id=...> stays as the user left it (open or closed) when htmx replaces it
 *   (the preview on every keystroke, a live page's poll): its state is kept by id.
 * - A preview answered with an error that left no preview (a half-typed selector: the error banner has
 *   [data-keep-last-preview]) keeps the last good cluster table under the error, greyed, rather than
 *   dropping it until the selector parses again.
 */
(function () {
  "use strict";

  function ago(seconds) {
    if (seconds < 5) return "just now";
    if (seconds < 60) return Math.floor(seconds) + " seconds ago";
    if (seconds < 3600) return Math.floor(seconds / 60) + (seconds < 120 ? " minute ago" : " minutes ago");
    return Math.floor(seconds / 3600) + (seconds < 7200 ? " hour ago" : " hours ago");
  }

  function tickFreshness() {
    document.querySelectorAll(".freshness[data-fresh-at]").forEach(function (badge) {
      if (!badge.dataset.offset) {
        var serverNow = Date.parse(badge.dataset.serverNow);
        badge.dataset.offset = String(isNaN(serverNow) ? 0 : Date.now() - serverNow);
      }
      var now = Date.now() - Number(badge.dataset.offset);
      var age = Math.max(0, (now - Date.parse(badge.dataset.freshAt)) / 1000);
      var interval = Number(badge.dataset.interval) || 15;
      // The badge learns of newer refreshes only when it polls: an age within one poll period of a
      // threshold is not stale yet (a 5 s heartbeat and a 10 s poll turned it amber 5 s in every 10).
      var poll = Number(badge.dataset.poll) || 0;
      var level = age >= 5 * interval + poll ? "red" : age >= 2 * interval + poll ? "amber" : "fresh";
      badge.dataset.level = level;
      var word = badge.querySelector(".freshness-word");
      if (word) word.textContent = level === "fresh" ? "live" : "stale";
      var shown = badge.querySelector(".freshness-age");
      if (shown) shown.textContent = ago(age);
    });
  }

  // A 304 of the badge brings the newest refresh time: the age counts from it, the tooltip names it
  // (the time as the server writes it: the ISO date and time of day in the server's zone).
  function followRefresh(region, freshAt) {
    region.querySelectorAll(".freshness[data-fresh-at]").forEach(function (badge) {
      if (badge.dataset.freshAt === freshAt || isNaN(Date.parse(freshAt))) return;
      badge.dataset.freshAt = freshAt;
      var when = freshAt.slice(0, 10) + " " + freshAt.slice(11, 19);
      badge.title = (badge.title || "").replace(/^Last successful refresh at [^.]*/, "Last successful refresh at " + when);
    });
    tickFreshness();
  }

  function reachableScrollers(root) {
    (root || document).querySelectorAll("main table").forEach(function (table) {
      if (table.scrollWidth > table.clientWidth + 1) {
        if (!table.hasAttribute("tabindex")) table.setAttribute("tabindex", "0");
        if (!table.hasAttribute("aria-label")) {
          var caption = table.querySelector("caption, th");
          table.setAttribute("aria-label", "Scrollable table" + (caption ? ": " + caption.textContent.trim() : ""));
        }
      } else if (table.getAttribute("tabindex") === "0") {
        table.removeAttribute("tabindex");
      }
    });
  }

  function liveRegion(elt) {
    return elt && elt.closest ? elt.closest("[data-live]") : null;
  }

  var nextEtags = {}; // region id -> the ETag of what the swap puts there (set once it has settled)

  document.addEventListener("htmx:configRequest", function (event) {
    var region = liveRegion(event.detail.elt);
    if (!region || event.detail.elt !== region) return;
    if (region.dataset.live !== "fragment") event.detail.path = window.location.pathname + window.location.search;
    event.detail.headers["X-Live-Poll"] = "1";
    if (region.dataset.etag) event.detail.headers["If-None-Match"] = region.dataset.etag;
  });

  document.addEventListener("htmx:beforeSwap", function (event) {
    var region = liveRegion(event.detail.elt);
    if (!region || event.detail.elt !== region) return;
    var xhr = event.detail.xhr;
    if (xhr.status === 304) {
      event.detail.shouldSwap = false;
      var freshAt = xhr.getResponseHeader("X-Fresh-At");
      if (freshAt) followRefresh(region, freshAt);
      return;
    }
    var etag = xhr.getResponseHeader("ETag");
    if (etag && region.id) nextEtags[region.id] = etag;
  });

  document.addEventListener("htmx:afterSettle", function () {
    Object.keys(nextEtags).forEach(function (id) {
      var region = document.getElementById(id); // the region itself, or what replaced it (outerHTML)
      if (region && region.hasAttribute("data-live")) region.dataset.etag = nextEtags[id];
    });
    nextEtags = {};
  });

  function followStrategy() {
    document.querySelectorAll("select[name=namespace_mapping_strategy]").forEach(function (select) {
      var form = select.form;
      var remote = form ? form.querySelector("input[name=remote_namespace_name]") : null;
      if (!remote || select.disabled) return;
      var used = select.value === "SelectedName";
      remote.disabled = !used;
      remote.setAttribute("aria-disabled", used ? "false" : "true");
      remote.title = used ? "" : "Only used with SelectedName";
    });
  }

  document.addEventListener("change", function (event) {
    if (event.target && event.target.name === "namespace_mapping_strategy") followStrategy();
  });

  function followConfirm(input) {
    var form = input.form;
    var button = form ? form.querySelector("button[type=submit]") : null;
    if (!button) return;
    var matches = input.value.trim() === input.dataset.confirmName;
    button.disabled = !matches;
    button.setAttribute("aria-disabled", matches ? "false" : "true");
  }

  function followConfirms(root) {
    (root || document).querySelectorAll("input[data-confirm-name]").forEach(followConfirm);
  }

  document.addEventListener("input", function (event) {
    var target = event.target;
    if (target && target.matches && target.matches("input[data-confirm-name]")) followConfirm(target);
  });

  document.addEventListener("change", function (event) {
    var radio = event.target;
    if (!radio || !radio.matches || !radio.matches("[data-merge-choice] input[type=radio][data-input]")) return;
    var fieldset = radio.closest("[data-merge-choice]");
    var field = radio.form && fieldset ? radio.form.elements.namedItem(fieldset.dataset.mergeChoice) : null;
    if (field && !field.disabled && "value" in field) field.value = radio.dataset.input;
  });

  // Times in the viewer's own zone; the UTC time stays in the tooltip.
  function localTimes(root) {
    (root || document).querySelectorAll("time[data-local]").forEach(function (el) {
      var when = new Date(el.getAttribute("datetime"));
      if (isNaN(when.getTime())) return;
      var pad = function (n) { return String(n).padStart(2, "0"); };
      el.textContent = when.getFullYear() + "-" + pad(when.getMonth() + 1) + "-" + pad(when.getDate()) + " " +
        pad(when.getHours()) + ":" + pad(when.getMinutes()) + ":" + pad(when.getSeconds());
    });
  }

  var keptOpen = {};

  document.addEventListener("toggle", function (event) {
    var details = event.target;
    if (details && details.matches && details.matches("details[data-keep-open][id]")) keptOpen[details.id] = details.open;
  }, true);

  function keepDetails(root) {
    (root || document).querySelectorAll("details[data-keep-open][id]").forEach(function (details) {
      if (Object.prototype.hasOwnProperty.call(keptOpen, details.id) && details.open !== keptOpen[details.id]) {
        details.open = keptOpen[details.id];
      }
    });
  }

  document.addEventListener("htmx:beforeSwap", function (event) {
    var target = event.detail.target;
    if (!target || target.id !== "preview" || !event.detail.shouldSwap) return;
    var incoming = document.createElement("template");
    incoming.innerHTML = event.detail.serverResponse || "";
    if (!incoming.content.querySelector("[data-keep-last-preview]") || incoming.content.querySelector("article.preview")) return;
    var last = target.querySelector("article.preview");
    if (!last) return;
    var kept = last.cloneNode(true);
    kept.classList.add("stale-preview");
    kept.removeAttribute("id");
    kept.querySelectorAll("[id]").forEach(function (el) { el.removeAttribute("id"); });
    kept.setAttribute("aria-label", "The last valid preview, until the selector is valid again");
    var note = document.createElement("p");
    note.className = "muted small stale-note";
    note.textContent = "The last valid preview, until the fields are valid again:";
    var holder = document.createElement("div");
    holder.appendChild(note);
    holder.appendChild(kept);
    event.detail.serverResponse = (event.detail.serverResponse || "") + holder.innerHTML;
  });

  document.addEventListener("DOMContentLoaded", function () {
    localTimes(document);
    document.body.addEventListener("htmx:afterSettle", function (event) { localTimes(event.target); });
    followStrategy();
    followConfirms(document);
    tickFreshness();
    reachableScrollers(document);
    setInterval(tickFreshness, 1000);
    window.addEventListener("resize", function () { reachableScrollers(document); });
    document.body.addEventListener("htmx:afterSettle", function (event) {
      tickFreshness();
      reachableScrollers(event.target);
      keepDetails(document);
    });
    document.body.addEventListener("htmx:afterSwap", function () { keepDetails(document); });
  });
})();
