// The HTML edition's one script: each figure in a notebook's output opens full size on a click (on a phone a
// wide figure is drawn at a fraction of its width and cannot be read in place).
document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("div.cell_output img").forEach((img) => {
    if (img.closest("a")) return;
    const link = document.createElement("a");
    link.href = img.src;
    link.title = "open the figure full size";
    img.replaceWith(link);
    link.appendChild(img);
  });
});
