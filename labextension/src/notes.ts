// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

import type { TranslationBundle } from '@jupyterlab/translation';
import { Widget } from '@lumino/widgets';

import type { ISetupNote } from './tokens';

/**
 * The class of a dialog body that explains why no tool instance is shown.
 */
export const NOTES_CLASS = 'jp-ToolTerminal-notes';

/**
 * The server's setup notes in one line (a tooltip).
 *
 * @param notes - The notes.
 */
export function notesSummary(notes: ReadonlyArray<ISetupNote>): string {
  return notes.map(note => note.message).join(' ');
}

/**
 * A dialog body that says why no tool instance is shown: the listing's
 * error, if any, then each note with a link to the README section that
 * explains the fix.
 *
 * @param error - Why the instances cannot be listed, or `null`.
 * @param notes - The server's setup notes.
 * @param trans - The translation bundle.
 */
export function notesBody(
  error: string | null,
  notes: ReadonlyArray<ISetupNote>,
  trans: TranslationBundle
): Widget {
  const body = document.createElement('div');
  body.className = NOTES_CLASS;
  const paragraph = (text: string): HTMLElement => {
    const node = document.createElement('p');
    node.textContent = text;
    body.appendChild(node);
    return node;
  };
  if (error !== null) {
    paragraph(trans.__('Tool instances cannot be listed: %1', error));
  }
  for (const note of notes) {
    const node = paragraph(note.message);
    if (note.help !== '') {
      const link = document.createElement('a');
      link.href = note.help;
      link.target = '_blank';
      link.rel = 'noopener noreferrer';
      link.textContent = trans.__('How to set it up (README)');
      node.appendChild(document.createTextNode(' '));
      node.appendChild(link);
    }
  }
  return new Widget({ node: body });
}
