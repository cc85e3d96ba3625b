// Live updates: the page listens to the server's change events and reloads when what it shows changed.
(function () {
  var url = document.body.getAttribute("data-live");
  if (!url || !window.EventSource) { return; }
  var first = null;
  var source = new EventSource(url);
  source.onmessage = function (event) {
    if (first === null) { first = event.data; return; }
    if (event.data !== first) { source.close(); window.location.reload(); }
  };
})();
