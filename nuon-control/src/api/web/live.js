// Live pages, by Server-Sent Events: a workflow's steps change in place
// (and the running step's log follows below them), and a job's log grows
// as its runner sends it. Text is set as text, never as HTML.
(function () {
  if (!window.EventSource) return;

  // The most lines a live view keeps (a page's worth): the page's memory
  // stays bounded however long the log grows (earlier lines stay on the
  // job's pages and in the raw download).
  var KEEP = 1000;
  // How often a live view redraws at most: each redraw lays the whole log
  // table out again, so a job printing thousands of lines a second costs
  // four layouts a second, not sixty (and the tab stays small).
  var EVERY_MS = 250;

  // One row of a log line, built as text.
  function row(l) {
    var n = l.attempt + '-' + l.seq;
    var tr = document.createElement('tr');
    tr.id = 'L' + n;
    tr.className = l.stream;
    tr.setAttribute('data-live', '');
    var num = document.createElement('td');
    var a = document.createElement('a');
    a.href = '#L' + n;
    a.textContent = n;
    num.appendChild(a);
    var text = document.createElement('td');
    var pre = document.createElement('pre');
    pre.textContent = l.text;
    text.appendChild(pre);
    tr.appendChild(num);
    tr.appendChild(text);
    return tr;
  }

  // Appends each line of a job's log to `body`; `done` once it is whole.
  // An event carries every line the server had at once (one JSON object a
  // line), and the lines that came in a quarter of a second are drawn
  // together, only the last KEEP of them built.
  function follow(url, body, done) {
    var src = new EventSource(url);
    var pending = [];
    var drawing = false;
    function draw() {
      drawing = false;
      var lines = pending;
      pending = [];
      // Only the last KEEP lines are ever built.
      var from = Math.max(0, lines.length - KEEP);
      var frag = document.createDocumentFragment();
      var rows = [];
      for (var i = from; i < lines.length; i++) {
        var tr = row(lines[i]);
        rows.push(tr);
        frag.appendChild(tr);
      }
      body.appendChild(frag);
      var extra = body.children.length - KEEP;
      if (extra > 0) {
        var range = document.createRange();
        range.setStartBefore(body.firstChild);
        range.setEndAfter(body.children[extra - 1]);
        range.deleteContents();
      }
      if (extra > 0 || from > 0) {
        var table = body.closest('table');
        if (!table.hasAttribute('data-trimmed')) {
          table.setAttribute('data-trimmed', '');
          var note = document.createElement('p');
          note.className = 'muted';
          note.textContent = 'Only the last ' + KEEP + ' lines are kept here; the earlier ones are on the job\'s pages and in the raw download.';
          table.parentNode.insertBefore(note, table);
        }
      }
      if (filter) filter(rows);
    }
    src.addEventListener('lines', function (e) {
      e.data.split('\n').forEach(function (t) {
        if (t) pending.push(JSON.parse(t));
      });
      if (!drawing) {
        drawing = true;
        setTimeout(function () { requestAnimationFrame(draw); }, EVERY_MS);
      }
    });
    src.addEventListener('end', function () {
      src.close();
      // What is still pending is drawn first.
      if (drawing) draw();
      if (done) done();
    });
    return src;
  }

  var wf = document.querySelector('[data-live-workflow]');
  if (wf) {
    var current = null;
    var currentSrc = null;
    var es = new EventSource(wf.getAttribute('data-live-workflow'));
    es.addEventListener('workflow', function (e) {
      var w = JSON.parse(e.data);
      var st = document.getElementById('status');
      st.textContent = w.status;
      st.className = 'badge ' + w.status;
      w.steps.forEach(function (s) {
        var row = document.querySelector('tr[data-step="' + CSS.escape(s.name) + '"]');
        if (!row) return;
        var b = row.querySelector('.badge');
        b.textContent = s.status;
        b.className = 'badge ' + s.status;
        if (s.reason) row.querySelector('.why').textContent = s.reason;
        row.querySelector('.approval').textContent =
          s.approved_by ? 'approved by ' + s.approved_by : (s.needs_approval ? 'needed' : '');
        if (s.job_id) {
          var log = row.querySelector('.log');
          if (!log.firstChild) {
            var a = document.createElement('a');
            a.href = '/jobs/' + s.job_id;
            a.textContent = 'log';
            log.appendChild(a);
          }
          // The running step's log, as it comes.
          if (s.status === 'running' && s.job_id !== current) {
            current = s.job_id;
            if (currentSrc) currentSrc.close();
            var section = document.getElementById('current');
            section.hidden = false;
            document.getElementById('current-step').textContent = s.name;
            var body = section.querySelector('tbody');
            while (body.firstChild) body.removeChild(body.firstChild);
            currentSrc = follow('/jobs/' + s.job_id + '/events', body, function () {
              section.setAttribute('data-complete', s.job_id);
            });
          }
        }
      });
      if (w.ended) {
        es.close();
        var actions = document.querySelector('.actions');
        if (actions) actions.setAttribute('data-stale', 'true');
      }
    });
  }

  // A log page's search: only the lines holding the text stay shown.
  var filter = null;
  var box = document.getElementById('log-filter');
  if (box) {
    // `rows`: only these new rows (the others are as they were); else
    // every row of the page.
    filter = function (rows) {
      var q = box.value.toLowerCase();
      if (rows && !q) return;
      rows = rows || document.querySelectorAll('#log tbody tr');
      for (var i = 0; i < rows.length; i++) {
        rows[i].hidden = !!q && rows[i].textContent.toLowerCase().indexOf(q) < 0;
      }
      var shown = q ? document.querySelectorAll('#log tbody tr:not([hidden])').length : 0;
      document.getElementById('log-matches').textContent = q ? shown + ' matching' : '';
    };
    box.addEventListener('input', function () { filter(); });
  }

  var log = document.querySelector('[data-live-log]');
  if (log) {
    follow(log.getAttribute('data-live-log'), log.querySelector('tbody'), function () {
      log.setAttribute('data-complete', 'true');
    });
  }
})();
