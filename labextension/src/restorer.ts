// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

import type { ILayoutRestorer } from '@jupyterlab/application';
import type { MainAreaWidget, WidgetTracker } from '@jupyterlab/apputils';
import type {
  ReadonlyJSONObject,
  ReadonlyPartialJSONObject
} from '@lumino/coreutils';

import type { IToolTerminal } from './tokens';
import { CommandIDs } from './tokens';

/**
 * What the layout restorer saves of a panel, and gives back to the open
 * command after a reload: the instance, the panel id, the session id (only
 * when the panel has one: an empty id is never saved) and, once that
 * session ended, what the panel said about it.
 *
 * @param widget - A tool terminal panel.
 */
export function restoreArgs(
  widget: MainAreaWidget<IToolTerminal>
): ReadonlyJSONObject {
  const session = widget.content.sessionId;
  const ended = widget.content.endMessage;
  return {
    instance: widget.content.instanceId,
    name: widget.id,
    ...(session ? { session } : {}),
    ...(session && ended ? { ended } : {})
  };
}

/**
 * The session a panel asks for (a restored panel's saved session), if the
 * arguments name one: a non-empty string, else `undefined`.
 *
 * @param args - The open command's arguments.
 */
export function sessionArg(
  args: ReadonlyPartialJSONObject
): string | undefined {
  return Private.nonEmptyString(args.session);
}

/**
 * What a restored panel said when its session ended, if the arguments
 * carry it: a non-empty string, else `undefined`.
 *
 * @param args - The open command's arguments.
 */
export function endedArg(args: ReadonlyPartialJSONObject): string | undefined {
  return Private.nonEmptyString(args.ended);
}

/**
 * Restore the tool terminal panels of the last page: each is reopened by
 * the open command with its saved session, which it reattaches to when the
 * server still holds it (within `disconnect_grace` of the reload), or says
 * that it ended and offers a new one.
 *
 * The tracker must save a panel again when its session changes
 * ({@link trackSessions}).
 *
 * @param restorer - JupyterLab's layout restorer.
 * @param tracker - The tracker of tool terminal panels.
 */
export function restorePanels(
  restorer: ILayoutRestorer,
  tracker: WidgetTracker<MainAreaWidget<IToolTerminal>>
): Promise<void> {
  return restorer.restore(tracker, {
    command: CommandIDs.open,
    args: restoreArgs,
    name: widget => widget.id
  });
}

/**
 * Save a panel in the tracker's state whenever its session changes, so that
 * a reload reattaches to the current session.
 *
 * @param tracker - The tracker of tool terminal panels.
 * @param widget - A panel (added to the tracker).
 */
export function trackSessions(
  tracker: WidgetTracker<MainAreaWidget<IToolTerminal>>,
  widget: MainAreaWidget<IToolTerminal>
): void {
  const save = () => {
    if (tracker.has(widget)) {
      void tracker.save(widget);
    }
  };
  widget.content.sessionChanged.connect(save);
  widget.content.endMessageChanged.connect(save);
}

/**
 * Module internals.
 */
namespace Private {
  /**
   * A value, if it is a non-empty string.
   */
  export function nonEmptyString(value: unknown): string | undefined {
    return typeof value === 'string' && value !== '' ? value : undefined;
  }
}
