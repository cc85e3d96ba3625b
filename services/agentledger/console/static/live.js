// Live updates: the server sends the page's fingerprint when it differs from the one the page was
// rendered from (the stream's since=), so any message means what the page shows has changed.
// The page reloads itself then, except when that would lose what the operator is doing: a form
// being sent (the reload would replace its answer and flash with this page again) or a field
// edited and not sent (a half-typed note); then it only says so, with a reload link.
(function () {
  var url = document.body.getAttribute("data-live");
  if (!url || !window.EventSource) { return; }
  var source = new EventSource(url);
  var sending = false;
  document.addEventListener("submit", function () { sending = true; source.close(); }, true);

  function edited() {
    var fields = document.querySelectorAll("input, textarea");
    for (var i = 0; i < fields.length; i++) {
      var f = fields[i];
      if (f.type === "hidden" || f.type === "submit") { continue; }
      if (f.type === "checkbox" || f.type === "radio") {
        if (f.checked !== f.defaultChecked) { return true; }
      } else if (f.value !== f.defaultValue) {
        return true;
      }
    }
    return false;
  }

  source.onmessage = function () {
    source.close();
    if (sending) { return; }
    if (!edited()) { window.location.reload(); return; }
    var notice = document.getElementById("live-notice");
    if (notice) { notice.hidden = false; }
  };
})();
