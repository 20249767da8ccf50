// A sign-in link (`/login#token=...`, as `nuon dev` prints it) signs in at
// once: the token stays in the page (a fragment is never sent) until the
// form posts it.
(function () {
  var m = /^#token=([A-Za-z0-9_.%-]+)$/.exec(location.hash);
  if (!m) return;
  history.replaceState(null, '', location.pathname);
  var field = document.getElementById('token');
  if (!field) return;
  field.value = decodeURIComponent(m[1]);
  field.form.submit();
})();
