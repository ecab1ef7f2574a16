// What a model source string is: a node-llama-cpp model URI (`hf:owner/repo:Q4_K_M`, `https://…/m.gguf`) or a path
// to a GGUF file. One rule for every place that reads `--model`, settings and the model commands.

/**
 * True for a URI: a scheme of two or more characters before the colon. A single letter before a colon is a Windows
 * drive (`C:\models\m.gguf`, and the drive-relative `C:m.gguf`), so a path.
 */
export function isModelUri(source: string): boolean {
  return /^[a-z][a-z0-9+.-]+:/i.test(source);
}
