// n8n-guard console: what the pages do in the browser. Everything works
// without it; with it, times read in the reader's time zone and pages that
// opt in (<main data-refresh="seconds">) stay current. A static file,
// because the CSP ("default-src 'self'") runs no inline script.
(function () {
  'use strict';

  var zone = 'UTC';
  try {
    zone = Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
  } catch (e) { /* an old browser: times stay UTC */ }

  var local = null;
  try {
    local = new Intl.DateTimeFormat('en-US', {
      timeZone: zone, year: 'numeric', month: '2-digit', day: '2-digit',
      hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23', timeZoneName: 'short'
    });
  } catch (e) { /* keep UTC */ }

  // <time datetime="RFC 3339">UTC text</time>, written by the template
  // function "when": the text becomes local time, the title keeps UTC.
  function localTimes(root) {
    if (!local) return;
    root.querySelectorAll('time[datetime]').forEach(function (t) {
      if (t.hasAttribute('data-local')) return;
      var d = new Date(t.getAttribute('datetime'));
      if (isNaN(d.getTime())) return;
      var p = {};
      local.formatToParts(d).forEach(function (x) { p[x.type] = x.value; });
      t.title = t.textContent.trim();
      t.textContent = p.year + '-' + p.month + '-' + p.day + ' ' + p.hour + ':' + p.minute + ':' + p.second + ' ' + p.timeZoneName;
      t.setAttribute('data-local', zone);
    });
    // The chart's hours (SVG text) read as hours of the same zone.
    root.querySelectorAll('[data-hour]').forEach(function (t) {
      var d = new Date(t.getAttribute('data-hour'));
      if (isNaN(d.getTime())) return;
      var p = {};
      local.formatToParts(d).forEach(function (x) { p[x.type] = x.value; });
      t.textContent = p.hour + ':' + p.minute;
    });
  }

  // Forms that carry a hidden "tz" read dates typed by the person in the
  // person's own zone.
  function fillZone(root) {
    root.querySelectorAll('input[name="tz"]').forEach(function (i) {
      if (!i.value) i.value = zone;
    });
  }

  // A stacked table on a phone labels each cell with its column's header
  // (console.css shows data-label before the cell). Key, state and action
  // cells read without one.
  function labelCells(root) {
    root.querySelectorAll('table:not(.numbers)').forEach(function (table) {
      var heads = table.querySelectorAll('thead th');
      if (!heads.length) return;
      table.querySelectorAll('tbody tr').forEach(function (tr) {
        var col = 0;
        Array.prototype.forEach.call(tr.children, function (td) {
          var th = heads[col];
          col += td.colSpan || 1;
          if (!th || td.tagName !== 'TD' || td.hasAttribute('data-label')) return;
          if (td.classList.contains('key') || td.classList.contains('state') || td.classList.contains('act')) return;
          var label = th.textContent.trim();
          if (label) td.setAttribute('data-label', label);
        });
      });
    });
  }

  function enhance(root) {
    localTimes(root);
    fillZone(root);
    labelCells(root);
  }

  function start() {
    var note = document.getElementById('tz-note');
    if (note && local) {
      note.textContent = 'in your time zone, ' + zone + ' (hover a time for UTC)';
    }
    enhance(document);
    document.addEventListener('submit', function (e) { fillZone(e.target); });
    var main = document.querySelector('main[data-refresh]');
    if (main) refresher(main);
  }

  // refresher fetches the page's own address every data-refresh seconds
  // and puts the new <main> in place of the old: no navigation, no flicker,
  // the scroll position kept. It waits while the tab is hidden, while a
  // form field has the focus, after a form was edited (a decision being
  // typed is never replaced), and while text is selected.
  function refresher(main) {
    var every = Math.max(1, parseInt(main.getAttribute('data-refresh'), 10) || 15) * 1000;
    var edited = false;
    var timer = 0;
    var inflight = false;

    function markEdited(e) {
      if (e.target && e.target.closest && e.target.closest('form')) edited = true;
    }
    document.addEventListener('input', markEdited, true);
    document.addEventListener('change', markEdited, true);

    // dirty: a field holds something else than the page drew, even
    // without an input event (autofill, a script, a password manager).
    function dirty() {
      var fields = main.querySelectorAll('form input, form textarea, form select');
      for (var i = 0; i < fields.length; i++) {
        var el = fields[i];
        if (el.type === 'hidden' || el.type === 'submit' || el.type === 'button') continue;
        if (el.type === 'checkbox' || el.type === 'radio') {
          if (el.checked !== el.defaultChecked) return true;
        } else if (el.tagName === 'SELECT') {
          for (var j = 0; j < el.options.length; j++) {
            if (el.options[j].selected !== el.options[j].defaultSelected) return true;
          }
        } else if (el.value !== el.defaultValue) {
          return true;
        }
      }
      return false;
    }

    function busy() {
      if (document.hidden || edited || dirty()) return true;
      var a = document.activeElement;
      if (a && a.closest && a.closest('form') && a.matches('input, select, textarea, button')) return true;
      var sel = window.getSelection && window.getSelection();
      return !!(sel && !sel.isCollapsed && main.contains(sel.anchorNode));
    }

    function schedule() {
      clearTimeout(timer);
      timer = setTimeout(tick, every);
    }

    // A refresh put off says so (console:refresh-waited), so that whoever
    // watches the page sees the interval pass without a clock of its own.
    function wait() {
      main.dispatchEvent(new CustomEvent('console:refresh-waited', { bubbles: true }));
      schedule();
    }

    function tick() {
      if (inflight) { schedule(); return; }
      if (busy()) { wait(); return; }
      inflight = true;
      fetch(location.href, { credentials: 'same-origin', cache: 'no-store', headers: { 'Accept': 'text/html' } })
        .then(function (r) {
          // Signed out, an error or a redirect elsewhere: keep what is shown.
          if (!r.ok || r.redirected) return null;
          return r.text();
        })
        .then(function (html) {
          if (html === null) return;
          if (busy()) { main.dispatchEvent(new CustomEvent('console:refresh-waited', { bubbles: true })); return; }
          var doc = new DOMParser().parseFromString(html, 'text/html');
          var fresh = doc.querySelector('main[data-refresh]');
          if (!fresh) return;
          swap(main, fresh);
          var foot = document.querySelector('body > footer');
          var freshFoot = doc.querySelector('body > footer');
          if (foot && freshFoot) {
            var drawn = freshFoot.querySelector('time');
            var old = foot.querySelector('time');
            if (drawn && old) old.replaceWith(document.importNode(drawn, true));
          }
          enhance(document);
          main.dispatchEvent(new CustomEvent('console:refreshed', { bubbles: true }));
        })
        .catch(function () { /* the guard is restarting: try again next time */ })
        .then(function () { inflight = false; schedule(); });
    }

    // swap puts fresh's children into main, keeping the scroll position,
    // which <details> are open, and the focus on a link of the same address.
    function swap(main, fresh) {
      var x = window.scrollX, y = window.scrollY;
      var open = Array.prototype.map.call(main.querySelectorAll('details'), function (d) { return d.open; });
      var focused = document.activeElement;
      var focusHref = focused && main.contains(focused) && focused.getAttribute && focused.getAttribute('href');
      var nodes = Array.prototype.map.call(fresh.childNodes, function (n) { return document.importNode(n, true); });
      main.replaceChildren.apply(main, nodes);
      main.querySelectorAll('details').forEach(function (d, i) {
        if (i < open.length) d.open = open[i];
      });
      if (focusHref) {
        var same = main.querySelector('[href="' + CSS.escape(focusHref) + '"]');
        if (same) same.focus({ preventScroll: true });
      }
      window.scrollTo(x, y);
    }

    document.addEventListener('visibilitychange', function () {
      if (!document.hidden) schedule();
    });
    schedule();
  }

  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', start);
  } else {
    start();
  }
}());
