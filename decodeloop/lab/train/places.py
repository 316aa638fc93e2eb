"""US cities by state, for the lab corpus: the names models learn to copy into calls."""

CITIES_BY_STATE = {
    "AL": "Birmingham Montgomery Mobile Huntsville Tuscaloosa Dothan",
    "AK": "Anchorage Fairbanks Juneau Sitka Ketchikan Wasilla",
    "AZ": "Phoenix Tucson Mesa Flagstaff Yuma Prescott Sedona",
    "AR": "Little Rock Fayetteville Fort Smith Jonesboro Conway Hot Springs",
    "CA": "Los Angeles San Diego San Jose Fresno Sacramento Oakland Eureka Redding Bakersfield Monterey",
    "CO": "Denver Boulder Aurora Pueblo Durango Greeley Aspen",
    "CT": "Hartford New Haven Stamford Bridgeport Norwalk Mystic",
    "DE": "Wilmington Dover Newark Lewes Milford Smyrna",
    "DC": "Washington",
    "FL": "Miami Orlando Tampa Jacksonville Tallahassee Pensacola Gainesville Naples Key West",
    "GA": "Atlanta Savannah Augusta Macon Athens Columbus Valdosta",
    "HI": "Honolulu Hilo Kailua Kahului Lihue Kapolei",
    "ID": "Boise Idaho Falls Pocatello Coeur d'Alene Moscow Twin Falls",
    "IL": "Chicago Springfield Peoria Rockford Naperville Champaign Joliet",
    "IN": "Indianapolis Fort Wayne Bloomington Evansville South Bend Muncie",
    "IA": "Des Moines Cedar Rapids Iowa City Davenport Ames Dubuque",
    "KS": "Wichita Topeka Lawrence Manhattan Salina Dodge City",
    "KY": "Louisville Lexington Bowling Green Frankfort Paducah Owensboro",
    "LA": "New Orleans Baton Rouge Shreveport Lafayette Lake Charles Monroe",
    "ME": "Portland Bangor Augusta Lewiston Bar Harbor Presque Isle",
    "MD": "Baltimore Annapolis Frederick Rockville Salisbury Hagerstown",
    "MA": "Boston Worcester Springfield Cambridge Lowell Salem Pittsfield",
    "MI": "Detroit Grand Rapids Lansing Ann Arbor Marquette Traverse City Flint",
    "MN": "Minneapolis Saint Paul Duluth Rochester Bemidji Mankato",
    "MS": "Jackson Gulfport Biloxi Hattiesburg Tupelo Oxford",
    "MO": "Kansas City St. Louis Springfield Columbia Joplin Branson",
    "MT": "Polson Billings Missoula Bozeman Helena Great Falls Kalispell Butte",
    "NE": "Omaha Lincoln Grand Island Kearney North Platte Scottsbluff",
    "NV": "Las Vegas Reno Henderson Carson City Elko Ely",
    "NH": "Manchester Concord Nashua Portsmouth Keene Hanover",
    "NJ": "Newark Jersey City Trenton Princeton Camden Atlantic City",
    "NM": "Albuquerque Santa Fe Las Cruces Taos Roswell Gallup",
    "NY": "New York Buffalo Albany Rochester Syracuse Ithaca Plattsburgh",
    "NC": "Charlotte Raleigh Asheville Durham Wilmington Boone Greensboro",
    "ND": "Fargo Bismarck Grand Forks Minot Dickinson Williston",
    "OH": "Columbus Cleveland Cincinnati Toledo Dayton Akron Athens",
    "OK": "Oklahoma City Tulsa Norman Stillwater Lawton Enid",
    "OR": "Portland Eugene Salem Bend Medford Astoria Corvallis",
    "PA": "Philadelphia Pittsburgh Harrisburg Erie Scranton Allentown Lancaster",
    "RI": "Providence Newport Warwick Cranston Pawtucket Westerly",
    "SC": "Charleston Columbia Greenville Myrtle Beach Spartanburg Beaufort",
    "SD": "Sioux Falls Rapid City Pierre Aberdeen Brookings Deadwood",
    "TN": "Nashville Memphis Knoxville Chattanooga Jackson Johnson City",
    "TX": "Houston Dallas Austin San Antonio El Paso Lubbock Amarillo Galveston Laredo",
    "UT": "Salt Lake City Provo Ogden Moab St. George Logan",
    "VT": "Burlington Montpelier Rutland Stowe Brattleboro Bennington",
    "VA": "Richmond Norfolk Virginia Beach Roanoke Charlottesville Arlington",
    "WA": "Seattle Spokane Tacoma Olympia Bellingham Yakima Walla Walla",
    "WV": "Charleston Morgantown Huntington Wheeling Beckley Parkersburg",
    "WI": "Milwaukee Madison Green Bay Eau Claire La Crosse Oshkosh",
    "WY": "Cheyenne Casper Laramie Jackson Sheridan Cody",
}

# Multi-word names above are joined back by this table; every other name is one word.
MULTI_WORD = {
    "Little Rock",
    "Fort Smith",
    "Hot Springs",
    "Los Angeles",
    "San Diego",
    "San Jose",
    "New Haven",
    "Key West",
    "Idaho Falls",
    "Coeur d'Alene",
    "Twin Falls",
    "Fort Wayne",
    "South Bend",
    "Des Moines",
    "Cedar Rapids",
    "Iowa City",
    "Dodge City",
    "Bowling Green",
    "New Orleans",
    "Baton Rouge",
    "Lake Charles",
    "Bar Harbor",
    "Presque Isle",
    "Grand Rapids",
    "Ann Arbor",
    "Traverse City",
    "Saint Paul",
    "Kansas City",
    "St. Louis",
    "Great Falls",
    "Grand Island",
    "North Platte",
    "Las Vegas",
    "Carson City",
    "Jersey City",
    "Atlantic City",
    "Santa Fe",
    "Las Cruces",
    "New York",
    "Grand Forks",
    "Oklahoma City",
    "Myrtle Beach",
    "Sioux Falls",
    "Rapid City",
    "Johnson City",
    "San Antonio",
    "El Paso",
    "Salt Lake City",
    "St. George",
    "Virginia Beach",
    "Walla Walla",
    "Green Bay",
    "Eau Claire",
    "La Crosse",
}


def _split(names: str) -> list[str]:
    words, out = names.split(), []
    i = 0
    while i < len(words):
        for length in (3, 2):
            candidate = " ".join(words[i : i + length])
            if candidate in MULTI_WORD:
                out.append(candidate)
                i += length
                break
        else:
            out.append(words[i])
            i += 1
    return out


CITIES: list[tuple[str, str]] = [(city, state) for state, names in CITIES_BY_STATE.items() for city in _split(names)]
