// Starts ReDoc on /api/redoc with the document this server publishes (no inline script: CSP).
window.addEventListener("load", function () {
  var node = document.getElementById("redoc");
  Redoc.init(node.getAttribute("data-spec-url"), { hideDownloadButton: false }, node);
});
