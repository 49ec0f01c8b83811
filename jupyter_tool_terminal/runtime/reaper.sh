# The kill functions of jupyter-tool-terminal's reaper and one-off kills (see reaper.py, which
# documents what they do). POSIX sh, run in tool containers by /bin/sh -c (any shell a tool
# image has: dash, busybox ash, bash).
#
# reaper.py puts these constants in front of the script (from its Python constants):
#   SESSION_TAG_VARIABLE, SERVER_VARIABLE, LEASE_VARIABLE  names of the tags in environments
#   KILL_TIME_LIMIT  seconds a kill's rounds may take;  ORPHANS_UNSURE  the status "unsure"
# shellcheck shell=sh
IFS=$(printf ' \t\nx'); IFS=${IFS%x}
stat_of() {
  _st=
  { while IFS= read -r _l; do _st="$_st$_l "; done; } 2>/dev/null < "/proc/$1/stat" || return 1
  case $_st in *") "*) _st=${_st##*) } ;; *) return 1 ;; esac
}
uptime_s() {
  read -r _up _ < /proc/uptime
  _up=${_up%%.*}
}
consider() {
  case " $victims " in *" $1 "*) return 0 ;; esac
  [ "$1" = "$me" ] && return 0
  [ "$1" = 1 ] && return 0
  if ! stat_of "$1"; then
    vanished=1
    return 0
  fi
  set -- "$1" "$2" $_st
  case $3 in Z|X|x) vanished=1; return 0 ;; esac
  [ "$4" = "$me" ] && return 0
  if [ "$2" = check ]; then
    case " $victims " in
      *" $4 "*) ;;
      *) case " $sids " in *" $6 "*) ;; *) return 0 ;; esac ;;
    esac
  fi
  victims="$victims $1"
  case $6 in 0|"$init_sid"|"$my_sid") return 0 ;; esac
  case " $sids " in *" $6 "*) ;; *) sids="$sids $6" ;; esac
  case $5 in 0|1|"$init_pgid"|"$my_pgid") ;; *)
    case " $groups " in *" $5 "*) ;; *) groups="$groups $5" ;; esac ;;
  esac
}
alternatives() {
  _alt=
  for _x in $1; do _alt="$_alt|$_x"; done
  _alt=${_alt#|}
}
grep_each() {
  # grep_each KIND OPTIONS PATTERN: grep /proc/*/KIND; the pids with a match in $_hits.
  # `grep -c -H` answers for every file it could read, in the order it was given them, so a
  # walk along both lists finds the files it could not read; one that no longer exists was
  # a process that vanished after the listing (vanished=1).
  _kind=$1 _options=$2 _pattern=$3 _hits=
  set -- /proc/[0-9]*/"$_kind"
  for _l in $(grep -c -H -s $_options ${_pattern:+"$_pattern"} "$@"); do
    while [ $# -gt 0 ] && [ "${_l%:*}" != "$1" ]; do
      [ -e "$1" ] || vanished=1
      shift
    done
    [ $# -gt 0 ] && shift
    case $_l in *:0) ;; *) _p=${_l#/proc/}; _hits="$_hits ${_p%%/*}" ;; esac
  done
  for _f in "$@"; do [ -e "$_f" ] || vanished=1; done
}
tagged() {
  # The processes a kill starts from, in $_hits: those carrying one of $_tags; or, for an
  # orphan kill, those carrying a server id other than the live ones in $_live.
  if [ -z "$_live" ]; then
    grep_each environ "-z -x -F $_tags" ""
    return
  fi
  grep_each environ "-z -x -E" "${SERVER_VARIABLE}=[0-9a-f]{32}"
  _any=$_hits
  grep_each environ "-z -x -F $_live" ""
  _spared=" $_hits "
  _hits=
  for _p in $_any; do
    case $_spared in *" $_p "*) ;; *) _hits="$_hits $_p" ;; esac
  done
}
unknown_lease() {
  # Whether a lease runs that the orphan kill was not told of: a server that started after
  # its caller listed the live ones, and whose shells must not be taken for orphans.
  _v=$vanished
  grep_each environ "-z -x -E" "${LEASE_VARIABLE}=[0-9a-f]{32}"
  _leases=$_hits
  grep_each environ "-z -x -F $_known" ""
  vanished=$_v
  for _p in $_leases; do
    case " $_hits " in *" $_p "*) ;; *) return 0 ;; esac
  done
  return 1
}
scan() {
  vanished=
  tagged
  for _p in $_hits; do consider "$_p" tagged; done
  [ -n "$victims" ] || return 0
  alternatives "$victims"
  _re="($_alt)"
  alternatives "$sids"
  [ -n "$_alt" ] && _re="($_re|-?[0-9]+ -?[0-9]+ ($_alt))"
  grep_each stat -E "\) . $_re "
  for _p in $_hits; do consider "$_p" check; done
}
signal() {
  for _g in $groups; do kill -s "$1" -- "-$_g" 2>/dev/null; done
  [ -n "$stopped" ] && kill -s "$1" $stopped 2>/dev/null
}
ids_of() {
  _pgid='' _sid=''
  stat_of "$1" || return 1
  set -- $_st
  _pgid=$3 _sid=$4
}
freeze_all() {
  held=
  for _f in /proc/[0-9]*/stat; do
    _p=${_f#/proc/}; _p=${_p%/stat}
    stat_of "$_p" && case $_st in T*|t*) held="$held $_p" ;; esac
  done
  kill -s STOP -1 2>/dev/null
  frozen=1
}
thaw_others() {
  _others=
  for _f in /proc/[0-9]*/stat; do
    _p=${_f#/proc/}; _p=${_p%/stat}
    case " $stopped $held " in *" $_p "*) ;; *) _others="$_others $_p" ;; esac
  done
  [ -n "$_others" ] && kill -s CONT $_others 2>/dev/null
}
finish() {
  signal KILL
  [ -n "$frozen" ] && thaw_others
  return "$1"
}
kill_session() {
  _tags='' _live='' _known=''
  for _t in "$@"; do _tags="$_tags -e ${SESSION_TAG_VARIABLE}=$_t"; done
  kill_rounds
}
kill_orphans() {
  _tags='' _live='' _known=''
  for _t in "$@"; do
    _live="$_live -e ${SERVER_VARIABLE}=$_t"
    _known="$_known -e ${LEASE_VARIABLE}=$_t"
  done
  kill_rounds
}
kill_rounds() {
  ids_of 1; init_pgid=$_pgid init_sid=$_sid
  ids_of "$me"; my_pgid=$_pgid my_sid=$_sid
  uptime_s; _deadline=$((_up + ${KILL_TIME_LIMIT}))
  stopped='' victims='' sids='' groups='' frozen='' held='' _vanishing=0
  while :; do
    _before=$groups
    scan
    if [ -n "$_live" ] && unknown_lease; then
      # A server the caller did not know of is alive: what this round found may be its
      # shells. What earlier rounds stopped is killed; the caller asks again.
      groups=$_before
      finish ${ORPHANS_UNSURE}
      return ${ORPHANS_UNSURE}
    fi
    if [ -n "$vanished" ] && [ -z "$frozen" ]; then
      # A process vanished between a listing and its reading: it may have forked a child the
      # listing missed, so this round proves nothing and another looks again. When rounds keep
      # seeing that (a forking loop outruns them), everything this kill may signal is frozen
      # at once (the kernel's `kill -1` reaches children forked meanwhile too), looked at in
      # peace, and all but the victims continued afterwards. (Processes a previous kill ended
      # vanish too while init reaps them: one more round, not a freeze.)
      _vanishing=$((_vanishing + 1))
      if [ "$_vanishing" -ge 3 ]; then
        freeze_all
        continue
      fi
    else
      _vanishing=0
    fi
    _new=
    for _v in $victims; do
      case " $stopped " in *" $_v "*) ;; *) _new="$_new $_v" ;; esac
    done
    if [ -z "$_new" ] && [ "$_vanishing" = 0 ]; then
      finish 0
      return 0
    fi
    if [ -n "$_new" ]; then
      stopped="$stopped $_new"
      signal STOP
    fi
    uptime_s
    if [ "$_up" -ge "$_deadline" ]; then
      finish 1
      return 1
    fi
  done
}
kill_instance() {
  stopped='' groups=''
  kill -s STOP -1 2>/dev/null
  for _f in /proc/[0-9]*/stat; do
    _p=${_f#/proc/}; _p=${_p%/stat}
    [ "$_p" = "$me" ] && continue
    stat_of "$_p" || continue
    set -- $_st
    [ "$2" = "$me" ] && continue
    [ "${20}" -gt "$_mark" ] 2>/dev/null && stopped="$stopped $_p"
  done
  signal KILL
  kill -s CONT -1 2>/dev/null
  return 0
}
shell_of() {
  # shell_of TAG [PID START]: the shell tagged TAG, in $_pid and $_start (its start time): the
  # session leader among the processes carrying the tag (the exec's own process). PID and
  # START, from an earlier answer, are taken again without a scan while that process lives.
  if [ -n "$2" ] && stat_of "$2"; then
    set -- "$1" "$2" "$3" $_st
    if [ "$7" = "$2" ] && [ "${23}" = "$3" ]; then
      _pid=$2 _start=$3
      return 0
    fi
  fi
  grep_each environ "-z -x -F -e ${SESSION_TAG_VARIABLE}=$1" ""
  for _p in $_hits; do
    stat_of "$_p" || continue
    set -- $_st
    [ "$4" = "$_p" ] || continue
    _pid=$_p _start=${20}
    return 0
  done
  return 1
}
name_of() {
  # name_of PID: the name of process PID (its comm) in $_name, in the letters an answer may
  # carry (any other byte is a "?"); empty when it is gone.
  _name='' _c=''
  { IFS= read -r _c; } 2>/dev/null < "/proc/$1/comm"
  while [ -n "$_c" ]; do
    _r=${_c#?}
    case ${_c%"$_r"} in [A-Za-z0-9._+-]) _name=$_name${_c%"$_r"} ;; *) _name="$_name?" ;; esac
    _c=$_r
  done
}
foreground() {
  # foreground TAG [PID START]: the shell tagged TAG, and the foreground process group of its
  # terminal (field 8 of its stat, tpgid) with the name of that group's leader.
  shell_of "$@" || return 1
  stat_of "$_pid" || return 1
  set -- $_st
  _group=$6
  _name=
  [ "$_group" = "$_pid" ] || name_of "$_group"
  echo "$_id foreground $_pid $_start $_group $_name"
}
request() {
  _id=$1 _verb=$2
  shift 2
  case $_id in ""|*[!0-9]*) return ;; esac
  [ "${#_id}" -le 9 ] || return
  case $_verb in
    session|orphans)
      # Tags, or the ids of the live servers: 32 hex digits each.
      [ $# -ge 1 ] || return
      for _t in "$@"; do
        case $_t in *[!0-9a-f]*) return ;; esac
        [ "${#_t}" -eq 32 ] || return
      done
      "kill_$_verb" "$@"
      echo "$_id done $?" ;;
    instance)
      [ $# -eq 1 ] || return
      case $1 in ""|*[!0-9]*) return ;; esac
      [ "${#1}" -le 18 ] || return
      _mark=$1
      kill_instance
      echo "$_id done $?" ;;
    foreground)
      # A tag, then maybe the pid and start time an earlier answer gave.
      [ $# -eq 1 ] || [ $# -eq 3 ] || return
      case $1 in *[!0-9a-f]*) return ;; esac
      [ "${#1}" -eq 32 ] || return
      case $2$3 in *[!0-9]*) return ;; esac
      [ "${#2}" -le 9 ] && [ "${#3}" -le 18 ] || return
      foreground "$@" || echo "$_id done 1" ;;
    mark)
      [ $# -eq 0 ] || return
      stat_of "$me" || return
      set -- $_st
      echo "$_id done 0 ${20}" ;;
  esac
}
me=$$
