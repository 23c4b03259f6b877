// Typesets the TeX of feedback pages into inline SVG, for autograder/engine/feedback_page.py.
//
// One process serves a whole batch of pages. Its first line on stdout is {"css": ...}: the
// rules that the SVG output needs on the page. Then, for each line read on stdin,
// {"strings": [...]} (one page's text, split where MathJax would split the page's DOM), it
// writes one line {"math": [[string, start, end, html], ...]}: which span of which string
// becomes which HTML. Offsets count code points, as Python's do. An escaped dollar (\$)
// comes back as a plain "$"; a formula that MathJax cannot convert is left out (its source
// stays on the page as text) and named on stderr.
//
// mathjax-full is found through NODE_PATH, which the Python side sets.
'use strict';

const readline = require('node:readline');
const {mathjax} = require('mathjax-full/js/mathjax.js');
const {TeX} = require('mathjax-full/js/input/tex.js');
const {SVG} = require('mathjax-full/js/output/svg.js');
const {liteAdaptor} = require('mathjax-full/js/adaptors/liteAdaptor.js');
const {RegisterHTMLHandler} = require('mathjax-full/js/handlers/html.js');
const {SafeHandler} = require('mathjax-full/js/ui/safe/SafeHandler.js');
const {AllPackages} = require('mathjax-full/js/input/tex/AllPackages.js');

const adaptor = liteAdaptor();
// Safe: a learner's own markdown is typeset too, so \href, \style and the like are filtered
// as the pages' former MathJax configuration (TeX-AMS_CHTML-full,Safe) did.
SafeHandler(RegisterHTMLHandler(adaptor));

// A fresh document per page, as in a browser: \newcommand definitions and equation numbers
// do not carry over from one learner's page to the next.
function pageDocument() {
  const tex = new TeX({
    packages: AllPackages,
    inlineMath: [['$', '$'], ['\\(', '\\)']],
    displayMath: [['$$', '$$'], ['\\[', '\\]']],
    processEscapes: true,
    tags: 'ams',
  });
  // 'local': each formula's SVG carries the glyph paths it uses, so it stands on its own.
  const svg = new SVG({fontCache: 'local'});
  return {tex, svg, doc: mathjax.document('', {InputJax: tex, OutputJax: svg})};
}

function escapeHtml(text) {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

// JavaScript offsets count UTF-16 units; Python's count code points.
function codePoints(text, offset) {
  return Array.from(text.slice(0, offset)).length;
}

function typesetPage(strings) {
  const {tex, doc} = pageDocument();
  const found = [];
  for (const item of tex.findMath(strings)) {
    const text = strings[item.n];
    let html;
    if (item.display === null) {
      html = escapeHtml(item.math);
    } else {
      try {
        html = adaptor.outerHTML(doc.convert(item.math, {display: item.display}));
      } catch (error) {
        process.stderr.write(`typeset_math: left as text: ${item.open}${item.math}${item.close}: ${error.message}\n`);
        continue;
      }
    }
    found.push([item.n, codePoints(text, item.start.n), codePoints(text, item.end.n), html]);
  }
  return found;
}

const first = pageDocument();
process.stdout.write(JSON.stringify({css: adaptor.textContent(first.svg.styleSheet(first.doc))}) + '\n');

readline.createInterface({input: process.stdin, terminal: false}).on('line', (line) => {
  const {strings} = JSON.parse(line);
  process.stdout.write(JSON.stringify({math: typesetPage(strings)}) + '\n');
});
