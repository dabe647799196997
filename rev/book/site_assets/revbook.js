// The HTML edition's one script: each figure in a notebook's output opens full size on a click (on a phone a
// wide figure is drawn at a fraction of its width and cannot be read in place), and says what it is to a screen
// reader: the build names an output image by its hash, so its alt text is the section it illustrates.
const FILE_NAME_ALT = /\.(png|jpe?g|svg|gif)$|_images|[0-9a-f]{20,}/i;

function sectionTitle(img) {
  const section = img.closest("section");
  const heading = section && section.querySelector("h1, h2, h3, h4");
  const page = document.querySelector("main h1");
  const text = (el) => (el ? el.textContent.replace(/[#\u00b6]/g, "").trim() : "");
  return text(heading) || text(page) || document.title;
}

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("div.cell_output img").forEach((img, i) => {
    if (!img.alt || FILE_NAME_ALT.test(img.alt)) img.alt = `Figure ${i + 1} of this page: ${sectionTitle(img)}`;
    if (img.closest("a")) return;
    const link = document.createElement("a");
    link.href = img.src;
    link.title = "open the figure full size";
    img.replaceWith(link);
    link.appendChild(img);
  });
});
