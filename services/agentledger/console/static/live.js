// Live updates: the server sends the page's fingerprint when it differs from the one the page was
// rendered from (the stream's since=), so any message means what the page shows has changed.
(function () {
  var url = document.body.getAttribute("data-live");
  if (!url || !window.EventSource) { return; }
  var source = new EventSource(url);
  source.onmessage = function () { source.close(); window.location.reload(); };
})();
