// Typesets the TeX of feedback pages into inline SVG, for autograder/engine/feedback_page.py.
//
// One process serves a whole batch of pages. Its first line on stdout is {"css": ...}: the
// rules that the SVG output needs on the page. Then, for each line read on stdin,
// {"strings": [...], "caps": {formulas, seconds, bytes}} (one page's text, split where MathJax
// would split the page's DOM, and how much it may cost), it writes one line
// {"math": [[string, start, end, html], ...]}: which span of which string becomes which HTML.
// Offsets count code points, as Python's do. An escaped dollar (\$) comes back as a plain "$";
// a formula that MathJax cannot convert is left out (its source stays on the page as text) and
// counted on stderr. A page with more formulas than caps.formulas gets {"capped": "formulas",
// "count": how many} instead, one whose typesetting passes caps.seconds (checked between
// formulas) {"capped": "seconds"}, one whose HTML passes caps.bytes {"capped": "bytes"}: the
// page's text is a submission's, and one page must not hold up the others.
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
    // MathJax's own bounds on one formula (its defaults, stated): a recursive \def stops there
    maxMacros: 1000,
    maxBuffer: 5 * 1024,
  });
  // 'local': each formula's SVG carries the glyph paths it uses, so it stands on its own.
  const svg = new SVG({fontCache: 'local'});
  return {tex, svg, doc: mathjax.document('', {InputJax: tex, OutputJax: svg})};
}

function escapeHtml(text) {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

// JavaScript offsets count UTF-16 units; Python's count code points. A page's offsets come in
// order, so each string is counted once, on from where its last offset was (never inside a
// surrogate pair: an offset is where a delimiter starts or ends).
function codePointCounter(strings) {
  const last = strings.map(() => ({at: 0, count: 0}));
  return (n, offset) => {
    const from = offset >= last[n].at ? last[n] : {at: 0, count: 0};
    last[n] = {at: offset, count: from.count + Array.from(strings[n].slice(from.at, offset)).length};
    return last[n].count;
  };
}

function typesetPage(strings, caps) {
  const deadline = Date.now() + caps.seconds * 1000;
  const {tex, doc} = pageDocument();
  const items = tex.findMath(strings);
  const formulas = items.filter((item) => item.display !== null).length; // not the escaped dollars
  if (formulas > caps.formulas) {
    return {capped: 'formulas', count: formulas};
  }
  const codePoints = codePointCounter(strings);
  const found = [];
  let bytes = 0;
  let failed = 0;
  for (const item of items) {
    if (Date.now() > deadline) {
      return {capped: 'seconds'};
    }
    let html;
    if (item.display === null) {
      html = escapeHtml(item.math);
    } else {
      try {
        html = adaptor.outerHTML(doc.convert(item.math, {display: item.display}));
      } catch (error) {
        failed += 1;
        continue;
      }
    }
    bytes += html.length;
    if (bytes > caps.bytes) {
      return {capped: 'bytes'};
    }
    found.push([item.n, codePoints(item.n, item.start.n), codePoints(item.n, item.end.n), html]);
  }
  if (failed) {
    // a count, not the TeX: the formulas are a submission's, and stderr is the grader's terminal
    process.stderr.write(`typeset_math: ${failed} formula(s) that MathJax could not convert left as text\n`);
  }
  return {math: found};
}

const first = pageDocument();
process.stdout.write(JSON.stringify({css: adaptor.textContent(first.svg.styleSheet(first.doc))}) + '\n');

readline.createInterface({input: process.stdin, terminal: false}).on('line', (line) => {
  const {strings, caps} = JSON.parse(line);
  process.stdout.write(JSON.stringify(typesetPage(strings, caps)) + '\n');
});
