// The installer page, live: the install's state and its provision's steps
// change in place as Server-Sent Events tell them, and once the install
// is up its README (sanitized by the server) shows, with no reload. Text
// is set as text; only the README's HTML, which the server made from
// Markdown letting nothing active through, is set as HTML.
(function () {
  if (!window.EventSource) return;
  var section = document.querySelector('[data-live-install]');
  if (!section) return;
  var es = new EventSource(section.getAttribute('data-live-install'));
  es.addEventListener('progress', function (e) {
    var p = JSON.parse(e.data);
    var st = document.getElementById('state');
    st.textContent = p.state;
    st.className = 'badge ' + p.state;
    document.getElementById('progress-status').textContent = p.status;
    var body = document.getElementById('steps');
    while (body.firstChild) body.removeChild(body.firstChild);
    p.steps.forEach(function (s) {
      var tr = document.createElement('tr');
      var name = document.createElement('td');
      name.textContent = s.name;
      var status = document.createElement('td');
      var badge = document.createElement('span');
      badge.className = 'badge ' + s.status;
      badge.textContent = s.status;
      status.appendChild(badge);
      var why = document.createElement('td');
      why.textContent = s.reason || '';
      tr.appendChild(name);
      tr.appendChild(status);
      tr.appendChild(why);
      body.appendChild(tr);
    });
    if (p.readme_html) {
      document.getElementById('readme-body').innerHTML = p.readme_html;
      document.getElementById('readme').hidden = false;
    }
    if (p.ended) {
      es.close();
      section.setAttribute('data-ended', p.state);
    }
  });
})();
