// Counts the images that loaded (for readers and for the headless-browser test).
window.addEventListener("load", function () {
  var imgs = Array.prototype.slice.call(document.images);
  var ok = imgs.filter(function (i) { return i.complete && i.naturalWidth > 0; });
  imgs.forEach(function (i) { if (!(i.complete && i.naturalWidth > 0)) i.classList.add("broken"); });
  document.body.setAttribute("data-images-total", String(imgs.length));
  document.body.setAttribute("data-images-loaded", String(ok.length));
  var s = document.getElementById("images-status");
  if (s) {
    s.textContent = "images: " + ok.length + " of " + imgs.length + " loaded";
    if (ok.length < imgs.length) s.className = "bad-text";
  }
});
